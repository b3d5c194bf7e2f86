# fleetmesh node image: a static, pure-Go build in a small Debian base, run
# as an unprivileged user with the node home (key, config.toml, store) on a
# volume. Build: docker build -t fleetmesh --build-arg VERSION=$(git describe --always) .
# Run:   docker run -v fm-home:/home/fleetmesh/node -p 7447:7447 -p 4001:4001 -p 4001:4001/udp fleetmesh
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=devel
ARG COMMIT=unknown
# The same flags as scripts/release.sh, so the image holds a reproducible build.
RUN CGO_ENABLED=0 go build -trimpath \
    -ldflags "-s -w -buildid= -X main.version=${VERSION} -X main.commit=${COMMIT}" \
    -o /out/fleetmesh ./cmd/fleetmesh

FROM debian:bookworm-slim
# ca-certificates: a gateway dials its backend over wss://.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --create-home --home-dir /home/fleetmesh fleetmesh \
 && install -d -o fleetmesh -g fleetmesh /home/fleetmesh/node /home/fleetmesh/lines
COPY --from=build /out/fleetmesh /usr/local/bin/fleetmesh
USER fleetmesh
ENV FLEETMESH_HOME=/home/fleetmesh/node
VOLUME ["/home/fleetmesh/node"]
# 7447: the Nostr relay (WebSocket), NIP-11, /didcomm, /healthz, /metrics.
# 4001: the mesh (libp2p TCP and QUIC).
EXPOSE 7447/tcp 4001/tcp 4001/udp
HEALTHCHECK --interval=30s --timeout=5s CMD ["fleetmesh", "status", "--json"]
ENTRYPOINT ["fleetmesh"]
CMD ["run", "--listen", "0.0.0.0:7447", \
     "--mesh-listen", "/ip4/0.0.0.0/tcp/4001", "--mesh-listen", "/ip4/0.0.0.0/udp/4001/quic-v1"]
