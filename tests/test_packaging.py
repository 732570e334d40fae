"""Every runtime file ships as package data and is read through importlib.resources
(the wheel itself is built, installed and run by .ci/wheel-check)."""

import fnmatch
import importlib
import re
import tomllib
from importlib.resources import files
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_DATA = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]


def shipped(path: Path) -> bool:
    """Whether pyproject.toml's package-data takes this file into the wheel."""
    package = path.parent
    while not (package / "__init__.py").exists():
        package = package.parent
    name = package.relative_to(ROOT).as_posix().replace("/", ".")
    relative = path.relative_to(package).as_posix()
    return any(fnmatch.fnmatch(relative, pattern) for key in ("*", name) for pattern in PACKAGE_DATA.get(key, ()))


def test_every_kernel_source_and_the_catalogue_are_package_data():
    runtime = [p for root in ("bench", "impls") for p in (ROOT / root).rglob("*") if p.suffix in (".cu", ".cuh")]
    assert len(runtime) >= 6
    runtime.append(ROOT / "bench" / "corpus" / "catalogue.toml")
    assert [p for p in runtime if not shipped(p)] == []


def test_the_wheel_takes_bench_and_impls_and_no_other_top_level_package():
    """benchmarks/ (studies beside the tests) matches bench*: it must not ship as a package."""
    from setuptools import find_namespace_packages

    found = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    packages = find_namespace_packages(str(ROOT), include=found["include"])
    assert {name.split(".")[0] for name in packages} == {"bench", "impls"}


def test_the_catalogue_is_datasets_catalogue_toml_read_as_a_resource():
    from bench.corpus import entries

    link = ROOT / "bench" / "corpus" / "catalogue.toml"
    assert link.is_symlink() and link.resolve() == (ROOT / "datasets" / "catalogue.toml").resolve()
    assert entries.CATALOGUE_PATH.read_bytes() == (ROOT / "datasets" / "catalogue.toml").read_bytes()
    assert entries.CATALOGUE_PATH == files("bench.corpus") / "catalogue.toml"


@pytest.mark.parametrize("module, name", [("bench.peaks", "SOURCE"), ("impls.admodel.gpu", "KERNEL_SOURCE"),
                                          ("impls.lda.drawz_gpu", "KERNEL_SOURCE"),
                                          ("impls.lda.model_gpu", "COUNTS_SOURCE"),
                                          ("impls.sumrv.gpu", "KERNEL_SOURCE"), ("impls.saber.gpu", "KERNEL_SOURCE")])
def test_kernel_sources_are_resources_of_their_package(module, name):
    imported = importlib.import_module(module)
    source = getattr(imported, name)
    package = module.rsplit(".", 1)[0] if module.count(".") > 1 else module.split(".")[0]
    assert source == files(package) / "kernels" / source.name
    assert source.is_file() and "__global__" in source.read_text()
    hash(source)  # raw_kernel's compile caches are keyed on it


def test_no_module_finds_files_beside_itself():
    """Files are found through importlib.resources, never Path(__file__) (bench.envinfo excepted: it
    hashes the sources wherever they are installed, and asks git where there is a checkout)."""
    offenders = [f"{p.relative_to(ROOT)}" for root in ("bench", "impls") for p in (ROOT / root).rglob("*.py")
                 if re.search(r"Path\(__file__\)", p.read_text()) and p.name != "envinfo.py"]
    assert offenders == []
