"""Start-up hook of the processes the fault tests start (``chatseek_testing.faults.SITE_DIR``).

Python imports ``sitecustomize`` from ``PYTHONPATH`` as it starts; this one installs the kill
point named by ``CHATSEEK_FAULT_KILL_AT`` and nothing else. It shadows a system
``sitecustomize`` (only Debian's crash reporter hook), which fault-test processes do not need.
"""

from chatseek_testing.faults import install

install()
