"""Regenerate ``xplane_pb2.py`` from ``xplane.proto``.

Needs ``grpcio-tools`` (which bundles ``protoc``)::

    pip install grpcio-tools && python -m tfadvisor.proto.regenerate
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
