# kvledger-server on Debian bookworm, built with the same setup script the README uses.
FROM debian:bookworm AS build
WORKDIR /src
COPY . .
RUN scripts/setup \
 && cmake -S . -B /build -DCMAKE_BUILD_TYPE=Release -DKVLEDGER_BUILD_TESTS=OFF \
 && cmake --build /build -j"$(nproc)" --target kvledger-server kvledger

FROM debian:bookworm-slim
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      libgrpc++1.51 libprotobuf32 libprometheus-cpp-pull1.0 libprometheus-cpp-core1.0 \
      libabsl20220623 ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /build/server/kvledger-server /build/server/kvledger-noop-server /build/client/kvledger /usr/local/bin/
USER nobody
EXPOSE 50051 9464
ENTRYPOINT ["/usr/local/bin/kvledger-server", "--grpc_address=0.0.0.0:50051", "--metrics_address=0.0.0.0:9464"]
