"""Tests for dataloader_sync._key_strings: the names of cache keys in shared stores."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import pytest

from dataloader_sync._key_strings import encode_key

KEYS = [0, 1, -1, 10**30, True, False, 1.0, 1.5, float("inf"), None, "", "1", "true", "null", 'a"b', "é\n",
        (), (1,), (1, 2), (2, 1), ("1", 2), (1, (2,)), ((1, 2),), b"", b"1", uuid.UUID(int=1), (uuid.UUID(int=1), b"x")]


def test_encode_key_gives_distinct_keys_distinct_names():
    assert len({encode_key(k) for k in KEYS}) == len(KEYS)


def test_encode_key_is_compact_json_for_plain_keys():
    assert encode_key(42) == "42" and encode_key("isbn") == '"isbn"' and encode_key((7, "b")) == '[7,"b"]'
    for key in (0, -7, 10**30, "", "é\n\u2028", 'q"uote'):  # the fast paths write what json.dumps writes
        assert encode_key(key) == json.dumps(key, separators=(",", ":"), ensure_ascii=False)


@pytest.mark.parametrize("key", [frozenset([1]), object(), 1 + 2j, (1, [2])])
def test_encode_key_refuses_keys_without_a_stable_name(key):
    with pytest.raises(TypeError, match="cache_key_fn"):
        encode_key(key)


def test_encode_key_is_the_same_in_another_process_with_another_hash_seed():
    code = ("import json, uuid\nfrom dataloader_sync._key_strings import encode_key\n"
            "print(json.dumps([encode_key(k) for k in [('ann', 1), 'str', b'b', uuid.UUID(int=3), 2.5]]))")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    outs = set()
    for seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=seed, PYTHONPATH=root)
        outs.add(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                                timeout=60, check=True).stdout)
    assert len(outs) == 1
    assert json.loads(outs.pop()) == [encode_key(k) for k in [("ann", 1), "str", b"b", uuid.UUID(int=3), 2.5]]
