"""Build of tfadvisor: the packages and the compiled kernels (``tfadvisor/_native.c``); metadata is in
pyproject.toml.

``pip install .`` compiles the extension ahead of time with the platform's C compiler against the
numpy headers (a build requirement), so nothing is compiled when tfadvisor first runs. The rules
(``rules/`` in the checkout) are installed as ``tfadvisor/_rules``.
"""

import sys

import numpy
from setuptools import Extension, find_namespace_packages, setup

if sys.platform == "win32":
    compile_args, link_args = ["/O2"], []
else:
    # -fwrapv: int64 arithmetic wraps, as numpy's does (the kernels' results must equal numpy's)
    compile_args = ["-O3", "-std=c99", "-fno-strict-aliasing", "-fwrapv", "-Wall"]
    link_args = ["-pthread"]

packages = [p for p in find_namespace_packages(include=["tfadvisor", "tfadvisor.*"]) if "__pycache__" not in p]

setup(
    packages=packages + ["tfadvisor._rules"],
    package_dir={"tfadvisor._rules": "rules"},
    exclude_package_data={"tfadvisor": ["*.c"]},  # the source ships in the sdist, the wheel holds the build
    package_data={
        "tfadvisor": ["**/*.js", "**/*.proto", "**/*.md", "capture/_sitecustomize/*.py", "schemas/*.json"],
        "tfadvisor._rules": ["*.toml", "*.md"],
    },
    ext_modules=[
        Extension(
            "tfadvisor._native",
            sources=["tfadvisor/_native.c"],
            include_dirs=[numpy.get_include()],
            extra_compile_args=compile_args,
            extra_link_args=link_args,
        )
    ],
)
