# kvledger in a container: kvledger-server, kvledger-noop-server and the kvledger CLI on Debian
# bookworm. Build: scripts/build-image.sh (podman, no registry needed) or `docker build .`.
#
# Stage 1 builds with the same setup script the README uses (its `build` profile: compilers and
# -dev packages, no test tools).
FROM docker.io/library/debian:bookworm AS build
WORKDIR /src
COPY . .
RUN scripts/setup build \
 && cmake -S . -B /build -DCMAKE_BUILD_TYPE=Release -DKVLEDGER_BUILD_TESTS=OFF -DKVLEDGER_BUILD_BENCH=OFF \
 && cmake --build /build -j"$(nproc)" --target kvledger-server kvledger-noop-server kvledger \
 && strip /build/server/kvledger-server /build/server/kvledger-noop-server /build/client/kvledger

# Stage 2: only the runtime libraries and the three binaries, as a non-root user.
FROM docker.io/library/debian:bookworm-slim
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      libgrpc++1.51 libgrpc29 libprotobuf32 libprometheus-cpp-core1.0 \
      libabsl20220623 libssl3 zlib1g libyaml-cpp0.7 libcrypt1 \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin kvledger
COPY --from=build /build/server/kvledger-server /build/server/kvledger-noop-server /build/client/kvledger \
     /usr/local/bin/
USER 10001:10001
EXPOSE 50051 9464
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
  CMD ["/usr/local/bin/kvledger", "health", "--target", "127.0.0.1:50051", "--timeout", "2"]
ENTRYPOINT ["/usr/local/bin/kvledger-server", "--grpc_address=0.0.0.0:50051", "--metrics_address=0.0.0.0:9464"]
