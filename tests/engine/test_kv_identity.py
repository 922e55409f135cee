"""What a saved KV state is keyed by: the model file's hash, remembered so a start doesn't rehash."""

from __future__ import annotations

import hashlib
import os

from whiz.engine.kv_identity import fingerprint, model_sha256


def test_a_models_hash_is_remembered_until_the_file_changes(tmp_path):
    model = tmp_path / "m.gguf"
    model.write_bytes(b"weights v1")
    memo = tmp_path / "kv" / "model-hashes.json"
    assert model_sha256(model, memo) == hashlib.sha256(b"weights v1").hexdigest()
    assert memo.exists()

    # Same size and mtime: the remembered answer, even though the bytes changed under it.
    st = model.stat()
    model.write_bytes(b"weights v2")
    os.utime(model, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert model_sha256(model, memo) == hashlib.sha256(b"weights v1").hexdigest()

    os.utime(model, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert model_sha256(model, memo) == hashlib.sha256(b"weights v2").hexdigest()


def test_any_difference_in_identity_changes_the_fingerprint():
    base = {"model_sha256": "a" * 64, "engine": "0.3.36+key", "n_seq_max": 10}
    assert fingerprint(base) == fingerprint(dict(reversed(base.items())))
    for key, other in (("model_sha256", "b" * 64), ("engine", "0.3.36+other"), ("n_seq_max", 8)):
        assert fingerprint({**base, key: other}) != fingerprint(base)
