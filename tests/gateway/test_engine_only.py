"""`whiz serve --engine-only`: a replica for a gateway serves the model API and nothing else."""

import httpx


def test_an_engine_only_replica_serves_the_api_but_no_web_app(serve_fake, tmp_path):
    full = serve_fake(workspace=tmp_path)
    replica = serve_fake(workspace=tmp_path, engine_only=True)
    assert httpx.get(full.root + "/").status_code == 200
    assert httpx.get(replica.root + "/").status_code == 404
    assert httpx.get(replica.root + "/whiz/info").status_code == 404
    chat = httpx.post(
        replica.base_url + "/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]}
    )
    assert chat.json()["choices"][0]["message"]["content"] == "echo: hi"
    assert httpx.get(replica.root + "/health").status_code == 200
