# fleetmesh node image: a static, pure-Go build and, on linux/amd64, the
# iroh helper beside it (scripts/iroh-helper.sh) with Debian's Node.js, in a
# small Debian base, run as an unprivileged user with the node home (key,
# config.toml, store) on a volume.
# Build: docker build -t fleetmesh --build-arg VERSION=$(git describe --always) .
# Run:   docker run -v fm-home:/home/fleetmesh/node -p 7447:7447 -p 4001:4001 -p 4001:4001/udp fleetmesh
#
# The node is /opt/fleetmesh/fleetmesh with the helper at
# /opt/fleetmesh/iroh/helper, where it looks for it (beside its
# executable); /usr/local/bin/fleetmesh links to it. @number0/iroh has a
# native binding for linux/amd64 only among Linux platforms, so an image
# for another platform has no helper and no Node.js, and its node runs on
# libp2p alone (spec/iroh.md, "Platforms without a binding").
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

# The iroh helper, installed from its lock for the image's platform by the
# script the release archives use. npm only fetches files here, so it runs
# on the build machine's platform whatever the target.
FROM --platform=$BUILDPLATFORM node:24-bookworm-slim AS helper
ARG TARGETOS=linux
ARG TARGETARCH=amd64
WORKDIR /src
COPY iroh/helper/helper.mjs iroh/helper/package.json iroh/helper/package-lock.json iroh/helper/
COPY scripts/iroh-helper.sh scripts/
RUN mkdir -p /out/iroh \
 && if bash scripts/iroh-helper.sh --bound "${TARGETOS}/${TARGETARCH}"; then \
      bash scripts/iroh-helper.sh /out/iroh/helper "${TARGETOS}/${TARGETARCH}"; \
    fi

# Debian 13: its nodejs (20.19) is new enough for @number0/iroh (20.3 or
# later); Debian 12's (18.20) is not.
FROM debian:trixie-slim
ARG TARGETARCH=amd64
# ca-certificates: a gateway dials its backend over wss://. nodejs: the
# iroh helper, where the platform has a binding.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && if [ "$TARGETARCH" = amd64 ]; then apt-get install -y --no-install-recommends nodejs; fi \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --create-home --home-dir /home/fleetmesh fleetmesh \
 && install -d -o fleetmesh -g fleetmesh /home/fleetmesh/node /home/fleetmesh/lines
COPY --from=build /out/fleetmesh /opt/fleetmesh/fleetmesh
COPY --from=helper /out/iroh /opt/fleetmesh/iroh
RUN ln -s /opt/fleetmesh/fleetmesh /usr/local/bin/fleetmesh
USER fleetmesh
ENV FLEETMESH_HOME=/home/fleetmesh/node
VOLUME ["/home/fleetmesh/node"]
# 7447: the Nostr relay (WebSocket), NIP-11, /didcomm, /healthz, /metrics.
# 4001: the mesh (libp2p TCP and QUIC). iroh binds an ephemeral UDP port
# unless [iroh] bind in the home's config.toml names one to publish.
EXPOSE 7447/tcp 4001/tcp 4001/udp
HEALTHCHECK --interval=30s --timeout=5s CMD ["fleetmesh", "status", "--json"]
ENTRYPOINT ["fleetmesh"]
CMD ["run", "--listen", "0.0.0.0:7447", \
     "--mesh-listen", "/ip4/0.0.0.0/tcp/4001", "--mesh-listen", "/ip4/0.0.0.0/udp/4001/quic-v1"]
