"""Regenerate ``xplane_pb2.py`` from ``xplane.proto``.

Needs ``grpcio-tools`` (which bundles ``protoc``). Use a protoc of the protobuf 4.x line: its
output has no runtime-version check, so the one module works with protobuf 4.21 up to 7.x (a
newer protoc writes code that refuses older runtimes, and TF 2.17 images and the Vertex AI
profiler still pin protobuf 4)::

    pip install 'grpcio-tools<1.60' && python -m tfadvisor.proto.regenerate
"""

from __future__ import annotations

from pathlib import Path


def main() -> None:
    from grpc_tools import protoc

    here = Path(__file__).resolve().parent
    rc = protoc.main(["protoc", f"-I{here}", f"--python_out={here}", str(here / "xplane.proto")])
    if rc != 0:
        raise SystemExit(rc)
    print(f"wrote {here / 'xplane_pb2.py'}")


if __name__ == "__main__":
    main()
