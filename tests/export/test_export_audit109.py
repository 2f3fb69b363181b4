"""What the export audit of 2026-12-07 (helper-109) found: the capture's own host name after
a multi-node run's flags and members; the machines and people that a cluster's environment
variables name; and an honest capture refused for the backend folder that a llama.cpp
build's `--version` names on every run."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote

import pytest
from rawfactory import Host, RawFactory
from test_export_audit_hidden import _unescaped

from verifier.export import ExportOptions, export_bundle
from verifier.verify import verify_path

HOST = Host(
    user="root", hostname="dgx01", home="/root", cwd="/workspace",
    binary="/opt/mlxcel/bin/mlxcel-server", model="/models/Qwen3-1.7B",
)  # fmt: skip


def _strings(out: Path) -> str:
    """Every published string, JSON's escapes decoded, and every file as written."""
    files = [p.read_text("utf-8", "replace") for p in sorted(out.rglob("*")) if p.is_file()]
    return "\n".join([_unescaped(out), *files])


def _exported(f: RawFactory, tmp_path: Path) -> Path:
    out = tmp_path / "public"
    export_bundle(ExportOptions(f.write(tmp_path / "raw"), out))
    assert verify_path(out).verified
    return out


@pytest.mark.parametrize(
    "arguments",
    [
        ["--data-parallel-address", "dgx01"],
        ["--data-parallel-address=dgx01"],
        ["--node-ip-address=dgx01"],
        ["--ray-address", "dgx01"],
        ["--kv-transfer-config", '{"kv_connector":"P2pNcclConnector","kv_ip":"dgx01"}'],
        ["--kv-transfer-config", '{"kv_connector": "P2pNcclConnector", "kv_ip": "dgx01"}'],
    ],
)
def test_the_machines_name_after_a_multi_node_flag_or_member(
    tmp_path: Path, arguments: list[str]
) -> None:
    f = RawFactory(host=HOST)
    f.server["argv"] += arguments
    assert "dgx01" not in _strings(_exported(f, tmp_path)).lower()


@pytest.mark.parametrize(
    ("variable", "value", "where"),
    [
        ("MASTER_ADDR", "dgx02", ["--dist-init-addr", "dgx02:5000"]),
        ("MASTER_ADDR", "dgx02", ["--master-addr", "dgx02"]),
        ("SLURMD_NODENAME", "dgx03", ["--host", "dgx03"]),
        ("K8S_NODE_NAME", "gpu17", ["--master-addr=gpu17"]),
    ],
)
def test_a_machine_of_the_cluster_an_environment_variable_names(
    tmp_path: Path, variable: str, value: str, where: list[str]
) -> None:
    f = RawFactory(host=HOST)
    f.server["env"][variable] = value
    f.server["argv"] += where
    f.exchanges()[0]["telemetry"]["before"]["cache_stats"]["extra"] = (
        f"Failed to connect to {value} port 5000"
    )
    assert value not in _strings(_exported(f, tmp_path))


@pytest.mark.parametrize("variable", ["JUPYTERHUB_USER", "SLURM_JOB_USER", "PBS_O_LOGNAME"])
def test_the_person_behind_a_shared_account(tmp_path: Path, variable: str) -> None:
    f = RawFactory(host=HOST)
    f.server["env"][variable] = "jsmith"
    f.exchanges()[0]["telemetry"]["before"]["cache_stats"]["extra"] = (
        "cannot open /mnt/shared/jsmith/ckpt/step-100"
    )
    published = _strings(_exported(f, tmp_path))
    assert "jsmith" not in published
    assert "/mnt/shared/<user>/ckpt/step-100" in published


VERSION = """load_backend: loaded CUDA backend from /home/jsmith/llama.cpp/build/bin/libggml-cuda.so
version: 6000 (e466f511)
built with cc (Ubuntu 13.2.0-23ubuntu4) 13.2.0 for x86_64-linux-gnu"""


def test_the_backend_folder_a_version_names_is_redacted_not_refused(tmp_path: Path) -> None:
    host = Host(
        user="jsmith", hostname="dgx01", home="/home/jsmith", cwd="/home/jsmith/work",
        binary="/home/jsmith/llama.cpp/build/bin/mlxcel-server",
        model="/home/jsmith/models/Qwen3-1.7B-4bit",
    )  # fmt: skip
    f = RawFactory(host=host)
    f.run["server"]["version"] = VERSION
    out = _exported(f, tmp_path)
    version = json.loads((out / "experiment.json").read_text())["server"]["version"]
    assert "jsmith" not in version
    assert "version: 6000 (e466f511)" in version
    assert version.startswith("load_backend: loaded CUDA backend from ")
    assert version.split("\n")[0].endswith("/llama.cpp/build/bin/libggml-cuda.so")


# helper-111, on the first version of the above: words that end in a key, and Jenkins' node


@pytest.mark.parametrize(
    "said",
    [
        'In code: ship = "Falcon"',
        '<button tooltip="Falcon">',
        "Set zip=falcon in the form.",
        'The record reads {"address": "Falcon"}.',
        'email_address = "falcon"',
    ],
)
def test_a_word_that_ends_like_a_key_names_no_machine(tmp_path: Path, said: str) -> None:
    """A reply is evidence: the machine's plain name after a word that only ends like a
    key of a machine's address (`ip`, `address`) is not its name given, and exports."""
    f = RawFactory(host=Host(hostname="falcon"))
    for exchange in f.exchanges():
        message = exchange["response"]["body"]["choices"][0]["message"]
        message["content"] += " " + said
    assert said in _strings(_exported(f, tmp_path))


def test_jenkins_node_name_is_no_machine(tmp_path: Path) -> None:
    f = RawFactory(host=HOST)
    f.server["env"]["NODE_NAME"] = "built-in"
    message = f.exchanges()[0]["response"]["body"]["choices"][0]["message"]
    message["content"] += " Use Python's built-in sorted()."
    assert "Python's built-in sorted()" in _strings(_exported(f, tmp_path))


@pytest.mark.parametrize(
    "arguments",
    [["--rdzv-endpoint", "dgx01"], ["--node-name=dgx01"], ["--nodelist", "dgx01"]],
)
def test_the_machines_name_after_a_launchers_flag(tmp_path: Path, arguments: list[str]) -> None:
    f = RawFactory(host=HOST)
    f.server["argv"] += arguments
    assert "dgx01" not in _strings(_exported(f, tmp_path)).lower()


# helper-112: a URL's password as a program prints it, and the first key of a logged list


def test_a_urls_percent_encoded_password_is_found_as_written_plainly(tmp_path: Path) -> None:
    password = "Xk9#mP2&qL7!vR4@"  # reserved characters: written %23, %26, %21, %40
    f = RawFactory()
    f.server["env"]["DATABASE_URL"] = (
        "postgres://svc:" + quote(password, safe="") + "@db.internal:5432/app"
    )
    f.exchanges()[0]["telemetry"]["before"]["cache_stats"]["extra"] = (
        f"retrying connection to db.internal as svc with {password}"
    )
    assert password not in _strings(_exported(f, tmp_path))


def test_a_key_in_vllms_start_up_line_is_removed(tmp_path: Path) -> None:
    key = "Qm7Zx2Lk9Pw4Rt8Vn3Bc"  # not the capture's own: read from a file it did not see
    f = RawFactory()
    f.run["notes"] = [f"non-default args: {{'model_tag': 'org/m', 'api_key': ['{key}']}}"]
    assert key not in _strings(_exported(f, tmp_path))


# Launchers' flags of a machine's plain name (not a distinctive one, found anywhere).


@pytest.mark.parametrize(
    "note",
    [
        "ray start --head-node-ip falcon",
        "python -m sglang.launch_server --head-node-ip=falcon",
        "mpirun -np 2 -H falcon,eagle ./bench",
        "srun -w falcon python serve.py",
    ],
)
def test_a_plain_machine_name_after_a_launchers_flag(tmp_path: Path, note: str) -> None:
    f = RawFactory(host=Host(hostname="falcon"))
    f.run["notes"] = [note]
    assert "falcon" not in _strings(_exported(f, tmp_path)).lower()


@pytest.mark.parametrize(
    ("variable", "value", "pieces"),
    [
        # (helper-119's F1) an environment value that holds an identifying value, the
        # bearer token or a URL's password, in free text: none of it is published, where
        # only the identifying part was removed before
        (
            "OTEL_EXPORTER_OTLP_HEADERS",
            "authorization=Bearer Zq3nB6cV1xM5kJ0hW2,x-tenant=acme-research-eu",
            ["Zq3nB6cV1xM5kJ0hW2", "acme-research-eu"],
        ),
        (
            "HTTPS_PROXY",
            "http://jsmith:Xk9pQ2mZ7@proxy.acme-corp.com:3128",
            ["jsmith", "Xk9pQ2mZ7", "proxy.acme-corp.com"],
        ),
    ],
)
def test_an_environment_value_that_holds_an_identifying_one_goes_whole(
    tmp_path: Path, variable: str, value: str, pieces: list[str]
) -> None:
    f = RawFactory(host=HOST)
    f.server["env"][variable] = value
    f.exchanges()[0]["telemetry"]["before"]["cache_stats"]["extra"] = f"proxy: {value} refused"
    published = _strings(_exported(f, tmp_path))
    assert "refused" in published
    assert not [piece for piece in pieces if piece in published]


@pytest.mark.parametrize(
    ("bound", "private"),
    [
        (["--host", "gpu-node-3.cluster.acme.internal"], ["gpu-node-3", "acme.internal"]),
        (["--host=gpu-node-3.cluster.acme.internal"], ["gpu-node-3", "acme.internal"]),
        (["--host", "10.20.30.41"], ["10.20.30.41"]),
    ],
)
def test_the_name_or_address_a_server_is_bound_to(
    tmp_path: Path, bound: list[str], private: list[str]
) -> None:
    """(helper-119's F5) A server bound to the machine by name or address (`--host NAME`):
    the name is the capture's own machine, found in the command line and anywhere else."""
    f = RawFactory(host=HOST)
    argv = f.server["argv"]
    at = argv.index("--host")
    argv[at : at + 2] = bound
    f.run["notes"] = [f"served on {bound[-1].removeprefix('--host=')} port 18128"]
    published = _strings(_exported(f, tmp_path))
    for value in private:
        assert value not in published


def test_loopback_and_every_interface_are_no_machine(tmp_path: Path) -> None:
    f = RawFactory(host=HOST)
    f.server["argv"][f.server["argv"].index("--host") + 1] = "0.0.0.0"
    out = _exported(f, tmp_path)
    experiment = json.loads((out / "experiment.json").read_text())
    assert "0.0.0.0" in experiment["conditions"][0]["servers"][0]["argv"]
