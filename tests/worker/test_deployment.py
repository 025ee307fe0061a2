"""A deployment written into the model repository is read back identically by the worker, from the
model config as Triton hands it to the Python backend (JSON)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from google.protobuf import json_format, text_format
from tritonclient.grpc import model_config_pb2 as mc

from worker.deployment import OPTIONAL, ModelDeployment, materialize_repository


def config_json(repo: Path, name: str) -> dict[str, object]:
    """config.pbtxt as the stub's `args["model_config"]`, decoded."""
    config = text_format.Parse((repo / name / "config.pbtxt").read_text(), mc.ModelConfig())
    decoded: dict[str, object] = json.loads(
        json_format.MessageToJson(config, preserving_proto_field_name=True)
    )
    return decoded


@pytest.mark.parametrize(
    "deployment",
    [
        ModelDeployment("m", Path("/artifact"), "v1"),
        ModelDeployment("m--v2", Path("/a b/c"), "v2", instances=2, dtype="auto", block_size=32,
                        kv_cache_dtype="bfloat16", kv_cache_blocks=600, max_num_seqs=8,
                        max_num_batched_tokens=256, scheduler_policy="max_utilization", fair_share=False,
                        intra_op_threads=3, trace_url="http://127.0.0.1:4318/v1/traces"),
    ],
    ids=["defaults", "every-field"],
)  # fmt: skip
def test_the_worker_reads_back_the_deployment_that_was_written(
    deployment: ModelDeployment, tmp_path: Path
) -> None:
    materialize_repository([deployment], tmp_path)
    assert (
        ModelDeployment.from_model_config(config_json(tmp_path, deployment.triton_model_name)) == deployment
    )


def test_the_model_folder_holds_only_the_shim(tmp_path: Path) -> None:
    materialize_repository([ModelDeployment("m", Path("/artifact"), "v1")], tmp_path)
    assert sorted(p.name for p in (tmp_path / "m").rglob("*") if p.is_file()) == ["config.pbtxt", "model.py"]
    assert "sys.path" not in (tmp_path / "m" / "1" / "model.py").read_text()


def test_a_missing_or_malformed_parameter_is_an_error(tmp_path: Path) -> None:
    materialize_repository([ModelDeployment("m", Path("/artifact"), "v1")], tmp_path)
    config = config_json(tmp_path, "m")
    params = config["parameters"]
    assert isinstance(params, dict)
    params["fair_share"] = {"string_value": "yes"}
    with pytest.raises(ValueError, match="not a boolean"):
        ModelDeployment.from_model_config(config)
    del params["block_size"]
    with pytest.raises(KeyError, match="block_size"):
        ModelDeployment.from_model_config(config)


def test_a_config_written_before_an_optional_parameter_existed_takes_its_default(tmp_path: Path) -> None:
    written = ModelDeployment("m", Path("/artifact"), "v1", trace_url="http://127.0.0.1:4318/v1/traces")
    materialize_repository([written], tmp_path)
    config = config_json(tmp_path, "m")
    params = config["parameters"]
    assert isinstance(params, dict)
    for name in OPTIONAL:
        del params[name]
    assert ModelDeployment.from_model_config(config) == ModelDeployment("m", Path("/artifact"), "v1")
