"""Wire layer: protobuf and gRPC code generated from `protos/hookserver/api/` (`make protos`).

Generated modules are committed and imported directly (`hookserver.api.runtime_hook_pb2`); nothing
here is hand-written beyond this file. Protobuf types stop at the front doors that own them.
"""

__all__: list[str] = []
