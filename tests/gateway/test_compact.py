"""POST /v1/responses/compact behind the gateway: the summary is a turn on a replica."""

import httpx

from tests.server.test_compact import CONVERSATION, summary_script


def test_the_gateway_compacts_on_a_replica_and_the_window_continues(serve_fake, gateway):
    replica = serve_fake(script=summary_script, engine_only=True)
    gw = gateway([replica.root])
    r = httpx.post(
        f"{gw.base_url}/responses/compact", json={"model": "fake", "input": CONVERSATION}, timeout=10
    )
    assert r.status_code == 200, r.text
    window = r.json()["output"]
    assert window[-1]["type"] == "compaction"
    body = {"model": "fake", "input": [*window, {"type": "message", "role": "user", "content": "go on"}]}
    resp = httpx.post(f"{gw.base_url}/responses", json=body, timeout=10).json()
    assert resp["status"] == "completed"
    assert resp["output"][0]["content"][0]["text"].startswith("seen: summary")
