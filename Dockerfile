# syntax=docker/dockerfile:1
# The rocketq image: `docker build -t rocketq:0.1.0 .`, then
#   docker run --rm rocketq:0.1.0 nameserver --set bind_address=0.0.0.0
#   docker run --rm rocketq:0.1.0 broker --config /etc/rocketq/broker.toml
# With grpc_listen_port = 8081 in broker.toml a broker also serves RocketMQ 5's clients
# (the apache.rocketmq.v2 endpoint; the image has the wheel's grpc extra for it).
# The Helm chart (deploy/k8s/helm/rocketq) runs it as user 10001 with a read-only root file
# system: only /home/rocketq/store (brokers), /home/rocketq/namesrv (nameservers) and /tmp
# are written.

# Build stage: the wheel, from the sources the wheel holds and nothing else, its hot path
# compiled with mypyc (setup.py; [tool.rocketq] compiled in pyproject.toml) by the C compiler
# this stage installs.
FROM python:3.11-slim AS build
RUN apt-get update \
    && apt-get install --yes --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml setup.py README.md ./
COPY rocketq/ rocketq/
COPY common/ common/
COPY remoting/ remoting/
COPY auth/ auth/
COPY cluster/ cluster/
COPY cli/ cli/
COPY nameserver/ nameserver/
COPY broker/ broker/
COPY storage/ storage/
COPY replication/ replication/
COPY sdk/ sdk/
COPY bench/ bench/
COPY chaos/ chaos/
COPY console/ console/
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /dist .

# Final stage: the wheel with its grpc extra (grpcio, for the apache.rocketmq.v2 endpoint)
# and their dependencies, a non-root user.
FROM python:3.11-slim
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN groupadd --system --gid 10001 rocketq \
    && useradd --system --uid 10001 --gid 10001 --home-dir /home/rocketq --create-home \
        --shell /usr/sbin/nologin rocketq
# The wheel's file name is only known once built: the shell expands it, then pip reads
# "<file>[grpc]" as the wheel with that extra.
RUN --mount=type=bind,from=build,source=/dist,target=/dist \
    for wheel in /dist/rocketq-*.whl; do pip install --no-cache-dir "${wheel}[grpc]"; done
RUN mkdir -p /home/rocketq/store /home/rocketq/namesrv \
    && chown -R 10001:10001 /home/rocketq
USER 10001:10001
WORKDIR /home/rocketq
# The broker's store (store_path_root_dir); the chart mounts a PersistentVolumeClaim here.
VOLUME ["/home/rocketq/store"]
# Nameserver: 9876 remoting, 9877 HTTP metrics. Broker: 10911 remoting (clients and admin),
# 10912 HA (masters), 10913 HTTP metrics, 40911 Raft, 8081 gRPC (RocketMQ 5's clients).
EXPOSE 9876 9877 10911 10912 10913 40911 8081
ENTRYPOINT ["rocketq"]
CMD ["--help"]
