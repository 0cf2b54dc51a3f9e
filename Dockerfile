# syntax=docker/dockerfile:1
# receiptd: build with the official Swift image, run on Debian slim with only OpenSSL, SQLite, libpq and libcurl added.
#   docker build -t receiptd .
#   docker run --rm -p 8080:8080 -v receiptd-ledger:/var/lib/receiptd receiptd
# scripts/check-docker checks this file against the repository and a built binary where no engine runs.

# SWIFT_VERSION follows the toolchain the project is developed with (6.3); any 6.x image with a -bookworm tag works.
# Keep the build image's Debian release equal to the runtime's so libssl3, libsqlite3-0 and libpq5 match the headers
# built against.
ARG SWIFT_VERSION=6.3
ARG DEBIAN_RELEASE=bookworm

FROM swift:${SWIFT_VERSION}-${DEBIAN_RELEASE} AS build
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
       libssl-dev libsqlite3-dev libpq-dev libcurl4-openssl-dev pkg-config \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Package.swift ./
COPY Sources ./Sources
# The Swift runtime and FoundationEssentials (Foundation without ICU) are linked in statically; what stays dynamic is
# glibc, libstdc++/libgcc_s (present in every Debian image), OpenSSL, SQLite, libpq and libcurl (libssl3, libsqlite3-0,
# libpq5, libcurl4 below; ca-certificates is the system trust store libcurl verifies Apple's servers against).
RUN swift build -c release --static-swift-stdlib --product receiptd \
    && install -D -m 0755 "$(swift build -c release --show-bin-path)/receiptd" /out/usr/local/bin/receiptd

FROM debian:${DEBIAN_RELEASE}-slim AS runtime
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends libssl3 libsqlite3-0 libpq5 libcurl4 ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 receiptd \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin receiptd \
    && install -d -m 0750 -o 10001 -g 10001 /var/lib/receiptd
COPY --from=build /out/usr/local/bin/receiptd /usr/local/bin/receiptd
# Config/receiptd.json but for 0.0.0.0 and a SQLite ledger in the volume below (scripts/check-docker compares them).
COPY Config/receiptd.image.json /etc/receiptd/receiptd.json
# RECEIPTD_API_TOKENS: PLACEHOLDER. The callers of the guarded routes (/v1/validate, the ledger's lookups and claims,
# /metrics, /), as the config's "api_tokens" JSON; pass yours from a secret store (`docker run -e` or a secret-backed
# env file; `receiptd token new` makes each entry). While it is empty those routes answer 403 auth_not_configured to
# every caller outside the container, and receiptd logs one warning at start-up saying so.
ENV RECEIPTD_CONFIG=/etc/receiptd/receiptd.json \
    RECEIPTD_HOST=0.0.0.0 \
    RECEIPTD_PORT=8080 \
    RECEIPTD_API_TOKENS=[]
# The SQLite ledger (WAL: receiptd.sqlite plus its -wal and -shm files while it runs). One container per volume: for
# several replicas use PostgreSQL (RECEIPTD_STORE_POSTGRES), as deploy/kubernetes does. Back it up while it runs
# with `docker exec CONTAINER receiptd store backup /var/lib/receiptd/backup-DATE.sqlite`.
VOLUME ["/var/lib/receiptd"]
# Numeric so that Kubernetes' runAsNonRoot can check it.
USER 10001:10001
EXPOSE 8080
# No curl in the image: bash's /dev/tcp sends the request and the status line is matched.
HEALTHCHECK --interval=15s --timeout=3s --start-period=5s --retries=3 \
    CMD ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/${RECEIPTD_PORT:-8080} && printf 'GET /healthz HTTP/1.1\\r\\nHost: localhost\\r\\nConnection: close\\r\\n\\r\\n' >&3 && head -n 1 <&3 | grep -q '^HTTP/1.1 200 '"]
# receiptd drains requests in flight for shutdown_grace_period seconds after SIGTERM.
STOPSIGNAL SIGTERM
ENTRYPOINT ["receiptd", "serve"]
