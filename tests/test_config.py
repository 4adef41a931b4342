import pytest

import nhtlib as nht
from nhtlib.config import ConfigError, TrainConfig


def test_defaults_are_valid_and_frozen():
    cfg = TrainConfig()
    with pytest.raises(Exception):
        cfg.lr = 1.0  # frozen


@pytest.mark.parametrize("field,value,needle", [
    ("optimizer", "adam", "optimizer='adam' is not allowed; choose one of 'adamw', 'sgd'"),
    ("lr", 0.0, "lr=0.0 is out of range"),
    ("lr", -1e-3, "lr=-0.001 is out of range"),
    ("weight_decay", -0.1, "weight_decay=-0.1 is out of range"),
    ("steps", 0, "steps=0 is out of range"),
    ("steps", 1.5, "steps=1.5 must be an integer"),
    ("lr_schedule", "linear", "lr_schedule='linear' is not allowed"),
    ("log_grid", "exp", "log_grid='exp' is not allowed; choose one of 'linear', 'log'"),
    ("betas", (0.9, 1.0), "betas[1]=1.0 is out of range"),
    ("lr", float("nan"), "lr=nan must be finite"),
])
def test_bad_values_fail_with_clear_message(field, value, needle):
    with pytest.raises(ConfigError) as err:
        TrainConfig(**{field: value})
    assert needle in str(err.value)


def test_unknown_field_fails():
    with pytest.raises(TypeError, match="unexpected keyword argument 'learning_rate'"):
        TrainConfig(learning_rate=1e-3)


def test_log_steps_linear_and_log():
    assert TrainConfig(steps=10, n_logs=5).log_steps() == [0, 2, 4, 6, 8, 10]
    log = TrainConfig(steps=1000, n_logs=4, log_grid="log").log_steps()
    assert log == [0, 1, 10, 100, 1000]


def test_hash_ignores_non_identity_fields_only():
    a = TrainConfig(checkpoint_every=10)
    assert a.digest() == TrainConfig(checkpoint_every=0).digest()
    assert a.digest() != TrainConfig(lr=2e-3).digest()


def test_chapter_params_and_scale(monkeypatch):
    with pytest.raises(ConfigError, match="scale='huge' is not allowed; choose one of 'smoke', 'cpu', 'paper'"):
        nht.ChapterParams(scale="huge")
    monkeypatch.setenv("NHT_SCALE", "smoke")
    assert nht.resolve_scale() == "smoke"
    assert nht.resolve_scale("cpu") == "cpu"
    monkeypatch.setenv("NHT_SCALE", "tiny")
    with pytest.raises(ConfigError, match="scale='tiny'"):
        nht.resolve_scale()


def test_device_resolution():
    assert nht.resolve_device("cpu") == "cpu"
    assert nht.resolve_device("auto") in ("cpu", "cuda")
    with pytest.raises(ConfigError):
        nht.resolve_device("tpu")


def test_model_registry_errors():
    with pytest.raises(ConfigError, match="model=.resnet9000. is unknown; choose one of feature_mlp, mlp, "):
        nht.models.config("resnet9000")
    with pytest.raises(ConfigError, match="activation='swish' is not allowed"):
        nht.models.config("mlp", activation="swish")


def test_data_root_error_names_the_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match="has no 'cifar10' folder; put the data set at"):
        nht.paths.data_root(tmp_path, need="cifar10")
    with pytest.raises(FileNotFoundError, match="no data folder found"):
        nht.paths.data_root(tmp_path / "missing")
