"""grpc.health.v1 as the Python gRPC client (grpcio-health-checking) sees a specd server.

    python grpc_health_client.py HOST:PORT SERVICE...

Prints one line per service, "SERVICE: STATUS" ("" is the whole server; an unknown service is
NOT_FOUND, as the protocol says), and then the first status a Watch of the whole server sends.
"""
import sys

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc


def main() -> int:
    address, services = sys.argv[1], sys.argv[2:]
    with grpc.insecure_channel(address) as channel:
        grpc.channel_ready_future(channel).result(timeout=30)
        health = health_pb2_grpc.HealthStub(channel)
        for service in services:
            try:
                reply = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
                status = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
            except grpc.RpcError as error:
                status = error.code().name
            print(f"{service}: {status}")
        watch = health.Watch(health_pb2.HealthCheckRequest(service=""), timeout=10)
        first = next(watch)
        print("watch: " + health_pb2.HealthCheckResponse.ServingStatus.Name(first.status))
        watch.cancel()
    return 0


if __name__ == "__main__":
    sys.exit(main())
