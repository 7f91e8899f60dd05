# chatseek vector service. Build from the repository root (compose.yaml does):
#   docker build -f services/vector/vector.Dockerfile --secret id=ca,src=/etc/ssl/certs/ca-certificates.crt .
# BASE_IMAGE: any Debian-like image with python3 and its venv module (default python:3.12-slim).
# The build stage installs every dependency at its version in requirements/lock.txt and checks
# it (deploy/image/pip-install.sh); the CA bundle (secret `ca`) and deploy/wheels/ are only
# mounted there. The service stage gets the venv alone.
ARG BASE_IMAGE=python:3.12-slim
FROM ${BASE_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PIP_ROOT_USER_ACTION=ignore
RUN python3 -m venv /opt/chatseek
COPY requirements/lock.txt deploy/image/pip-install.sh deploy/image/check_pins.py /opt/build/
COPY libs/chatseek-proto /app/libs/chatseek-proto
COPY libs/chatseek-core /app/libs/chatseek-core
RUN --mount=type=secret,id=ca \
    sh /opt/build/pip-install.sh /app/libs/chatseek-proto /app/libs/chatseek-core
COPY services/vector /app/services/vector
RUN --mount=type=secret,id=ca \
    sh /opt/build/pip-install.sh /app/services/vector && sh /opt/build/pip-install.sh --finish

FROM ${BASE_IMAGE}
RUN useradd --create-home --uid 10001 chatseek && mkdir -p /data && chown chatseek /data
COPY --from=build /opt/chatseek /opt/chatseek
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PATH=/opt/chatseek/bin:$PATH \
    CHATSEEK_LISTEN=0.0.0.0:47105 CHATSEEK_DATA_DIR=/data CHATSEEK_LOG_FORMAT=json
USER chatseek
WORKDIR /home/chatseek
EXPOSE 47105
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-m", "chatseek_core.probe"]
CMD ["python", "-m", "chatseek_vector"]
