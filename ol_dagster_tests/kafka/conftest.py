"""The Kafka tests' settings: a ``kafka`` block on the test broker."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ol_dagster_tests.conftest import settings_data
from ol_dagster_tests.kafka_broker import TansuBroker


@pytest.fixture
def kafka_env(
    broker: TansuBroker, write_settings: Callable[..., Path], tmp_path: Path
) -> Callable[..., Path]:
    """Settings with a ``kafka`` block on the broker: a fresh group and fresh topic names."""

    def make(topics: list[dict[str, Any]], **kafka: Any) -> Path:
        data = settings_data(tmp_path)
        data["kafka"] = {
            "bootstrapServers": broker.bootstrap,
            "groupId": f"g-{uuid.uuid4().hex[:8]}",
            "pollTimeoutSeconds": 0.2,
            # Tansu lets a new group's first member in after half the session: 1 s here
            "sessionTimeoutSeconds": 2,
            "topics": topics,
            **kafka,
        }
        path = write_settings(data)
        return path

    return make
