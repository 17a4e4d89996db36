"""Regenerate the checked-in Python modules from geyser.proto and solana-storage.proto.

    .venv/bin/python -m geyser_proto.generate      (or: .venv/bin/python geyser_proto/generate.py)

Runs grpcio-tools' protoc (messages, their .pyi stubs, the gRPC client and servicer), drops the empty
gRPC module protoc writes for solana-storage.proto (it defines no service), and rewrites protoc's
top-level imports (`import solana_storage_pb2`) into package imports (`from geyser_proto import
solana_storage_pb2`), which protoc cannot do without changing the import paths inside the .proto files
and so the file names a client built from the public files expects. protoc writes no stub for the gRPC
module, so this script writes `geyser_pb2_grpc.pyi` from the service descriptor: with it, calling the
stub or registering a servicer is a typed call under mypy --strict (grpc itself has no type stubs here,
so the channel, server and multicallables stay `Any`).

The generated code checks its runtime: it needs protobuf and grpcio at least as new as the
grpcio-tools that generated it (see the `GRPC_GENERATED_VERSION` and `ValidateProtobufRuntimeVersion`
lines), so bump the lower bounds in pyproject.toml when regenerating with a newer grpcio-tools.
"""

from __future__ import annotations

import re
import sys
import tempfile
from importlib import resources
from pathlib import Path

from google.protobuf import descriptor_pb2
from grpc_tools import protoc

HERE = Path(__file__).resolve().parent
PACKAGE = "geyser_proto"
PROTOS = ("geyser.proto", "solana-storage.proto")
MODULES = ("geyser_pb2", "solana_storage_pb2")
GENERATED = ("geyser_pb2.py", "geyser_pb2.pyi", "geyser_pb2_grpc.py", "solana_storage_pb2.py", "solana_storage_pb2.pyi")
GRPC_STUB = "geyser_pb2_grpc.pyi"
EMPTY = ("solana_storage_pb2_grpc.py",)


def package_imports(text: str) -> str:
    """`import m as x` and `from m import y` of a generated module become imports from the package."""
    names = "|".join(MODULES)
    text = re.sub(rf"^import ({names}) as ", rf"from {PACKAGE} import \1 as ", text, flags=re.MULTILINE)
    return re.sub(rf"^from ({names}) import ", rf"from {PACKAGE}.\1 import ", text, flags=re.MULTILINE)


def grpc_stub(service: descriptor_pb2.ServiceDescriptorProto) -> str:
    """The .pyi of protoc's gRPC module for `service`: the stub, the servicer, the registration."""
    name = service.name
    lines = [
        f"# Typed surface of {GRPC_STUB[:-1]}, written by geyser_proto/generate.py. DO NOT EDIT.",
        "from typing import Any",
        "",
        f"from {PACKAGE} import geyser_pb2",
        "",
        "GRPC_GENERATED_VERSION: str",
        "GRPC_VERSION: str",
        "",
        f"class {name}Stub:",
        "    def __init__(self, channel: Any) -> None: ...",
        *(f"    {m.name}: Any" for m in service.method),
        "",
        f"class {name}Servicer:",
    ]
    for m in service.method:
        request = (
            "request_iterator: Any" if m.client_streaming else f"request: geyser_pb2.{m.input_type.split('.')[-1]}"
        )
        lines.append(f"    def {m.name}(self, {request}, context: Any) -> Any: ...")
    lines += [
        "",
        f"def add_{name}Servicer_to_server(servicer: {name}Servicer, server: Any) -> None: ...",
        "",
        f"class {name}:",
    ]
    for m in service.method:
        lines += [
            "    @staticmethod",
            f"    def {m.name}(request: Any, target: str, *args: Any, **kwargs: Any) -> Any: ...",
        ]
    return "\n".join(lines) + "\n"


def generate(out_dir: Path = HERE) -> list[Path]:
    """Run protoc over the .proto files beside this module, writing into `out_dir`; returns the files."""
    well_known = str(resources.files("grpc_tools") / "_proto")
    with tempfile.TemporaryDirectory() as tmp:
        descriptor_set = Path(tmp) / "geyser.pb"
        args = [
            "grpc_tools.protoc",
            f"-I{HERE}",
            f"-I{well_known}",
            f"--python_out={out_dir}",
            f"--pyi_out={out_dir}",
            f"--grpc_python_out={out_dir}",
            f"--descriptor_set_out={descriptor_set}",
            *(str(HERE / name) for name in PROTOS),
        ]
        if protoc.main(args) != 0:
            raise SystemExit("protoc failed")
        files = descriptor_pb2.FileDescriptorSet.FromString(descriptor_set.read_bytes()).file
    for name in EMPTY:
        (out_dir / name).unlink(missing_ok=True)
    written = []
    for name in GENERATED:
        path = out_dir / name
        path.write_text(package_imports(path.read_text()))
        written.append(path)
    (service,) = (s for f in files for s in f.service)
    stub = out_dir / GRPC_STUB
    stub.write_text(grpc_stub(service))
    written.append(stub)
    return written


def main() -> None:
    for path in generate():
        print(path.relative_to(HERE.parent), file=sys.stderr)


if __name__ == "__main__":
    main()
