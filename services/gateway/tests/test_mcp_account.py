"""``with_account``: which requests a tool sends for the MCP process's own account.

Real request messages of the gateway's API; the stack test in ``tests/test_accounts_stack.py``
drives a real ``chatseek mcp`` session over stdio with its own ``CHATSEEK_ACCOUNT``.
"""

from __future__ import annotations

from chatseek.common.v1 import common_pb2 as common
from chatseek.gateway.v1 import gateway_service_pb2 as pb
from chatseek_gateway.mcp.tools.calls import with_account


def test_a_request_that_names_no_account_is_sent_for_the_connections() -> None:
    request = pb.SearchRequest(query="tram")
    with_account(request, "work")
    assert request.account == "work"
    active = pb.SearchMessagesRequest(query="tram", source=common.SOURCE_ACTIVE)
    with_account(active, "work")
    assert active.account == "work"


def test_an_account_the_request_names_stays() -> None:
    request = pb.ThreadRequest(account="home", chat="Family", msg_id=3)
    with_account(request, "work")
    assert request.account == "home"


def test_a_request_for_every_account_keeps_its_empty_account() -> None:
    request = pb.SearchMessagesRequest(query="tram", source=common.SOURCE_ALL)
    with_account(request, "work")
    assert request.account == ""


def test_a_request_inside_a_request_is_filled_in_too() -> None:
    stats = pb.MessageStatsRequest(search=pb.SearchMessagesRequest(query="tram"), by="chat")
    with_account(stats, "work")
    assert stats.search.account == "work"
    every = pb.MessageStatsRequest(
        search=pb.SearchMessagesRequest(query="tram", source=common.SOURCE_ALL)
    )
    with_account(every, "work")
    assert every.search.account == ""


def test_no_account_of_its_own_changes_nothing() -> None:
    request = pb.SearchRequest(query="tram")
    with_account(request, "")
    assert request == pb.SearchRequest(query="tram")
    status = pb.StatusRequest()
    with_account(status, "work")
    assert status == pb.StatusRequest()
