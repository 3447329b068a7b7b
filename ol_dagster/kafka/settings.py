"""The ``kafka:`` block of the settings file: which topics ``ol-dagster consume`` reads, and how.

Each topic feeds one sync definition; its messages are stream events, or, with ``snapshot:
true``, whole snapshots framed by headers (``ol_dagster.kafka.intake``). The consumer group, the
broker's security and librdkafka's other properties are here too. Secrets are ``{env: NAME}``
only, resolved when the consumer starts: a ``properties`` key that would hold one (librdkafka's
sensitive properties, ``_RK_SENSITIVE`` in its ``rdkafka_conf.c``, and the families their names
share) written literally is refused at load; the SASL password and the TLS key's password have
keys of their own in ``security``.

Its secrets are resolved by ``settings_base.EnvSecret`` (the one rule for a secret's value) when
they are used.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from ol_dagster.settings_base import EnvSecret, StrictModel

# Kafka's own rule for a topic name
_TOPIC = r"^[A-Za-z0-9._-]{1,249}$"
# librdkafka properties that hold a secret, written as {env: NAME}: librdkafka's sensitive ones
# (ssl.key.password, ssl.key.pem, ssl_key, ssl.keystore.password, sasl.password,
# sasl.oauthbearer.config, which may hold a client secret) and the families of their names:
# *password*, *passphrase* (sasl.oauthbearer.assertion.private.key.passphrase), *secret*
# (sasl.oauthbearer.client.secret), *.pem, *key, *jaas*, *token* but a URL (the OIDC token
# endpoint's is no secret)
_SECRET_PROPERTY = re.compile(
    r"password|passphrase|secret|jaas|token(?!.*\.url$)|\.pem$|key$|^sasl\.oauthbearer\.config$",
    re.IGNORECASE,
)
_AS_ENV = "{env: NAME}"
# properties the intake sets itself: its guarantees depend on them
_OWN_PROPERTIES = {
    "bootstrap.servers": "bootstrapServers",
    "group.id": "groupId",
    "client.id": "clientId",
    "enable.auto.commit": "(offsets are committed after the events are stored)",
    "enable.auto.offset.store": "(offsets are committed after the events are stored)",
    "auto.offset.reset": "startFrom",
    "security.protocol": "security.protocol",
    "sasl.mechanism": "security.saslMechanism",
    "sasl.mechanisms": "security.saslMechanism",
    "sasl.username": "security.username",
    "sasl.password": f"security.password ({_AS_ENV})",
    "ssl.key.password": f"security.keyPassword ({_AS_ENV})",
    "statistics.interval.ms": "(the consumer reads whether a broker answers from them)",
}


class KafkaSecret(StrictModel):
    """``{env: NAME}``: read from the environment when the consumer starts, never stored."""

    env: Annotated[str, Field(min_length=1, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]

    def resolve(self) -> str:
        return EnvSecret(env=self.env).resolve()

    def __repr__(self) -> str:
        return f"KafkaSecret(env={self.env!r})"


class KafkaSecurity(StrictModel):
    protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    saslMechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = None
    username: str | None = None
    password: KafkaSecret | None = None
    caLocation: str | None = None  # the CA bundle that signed the brokers' certificates
    certificateLocation: str | None = None  # a client certificate (mutual TLS)
    keyLocation: str | None = None
    keyPassword: KafkaSecret | None = None

    @model_validator(mode="after")
    def _consistent(self) -> KafkaSecurity:
        sasl = self.protocol.startswith("SASL")
        if sasl and not (self.saslMechanism and self.username and self.password):
            raise ValueError(
                f"protocol {self.protocol} needs saslMechanism, username and password "
                "({env: NAME})"
            )
        if not sasl and (self.saslMechanism or self.username or self.password):
            raise ValueError(
                f"saslMechanism, username and password need a SASL protocol, not {self.protocol}"
            )
        tls = self.protocol.endswith("SSL")
        if not tls and (self.caLocation or self.certificateLocation or self.keyLocation):
            raise ValueError(f"TLS files need protocol SSL or SASL_SSL, not {self.protocol}")
        return self

    def config(self) -> dict[str, str]:
        """librdkafka's properties, secrets resolved."""
        out = {"security.protocol": self.protocol}
        if self.saslMechanism:
            out["sasl.mechanism"] = self.saslMechanism
        if self.username:
            out["sasl.username"] = self.username
        if self.password:
            out["sasl.password"] = self.password.resolve()
        for key, value in (
            ("ssl.ca.location", self.caLocation),
            ("ssl.certificate.location", self.certificateLocation),
            ("ssl.key.location", self.keyLocation),
        ):
            if value:
                out[key] = value
        if self.keyPassword:
            out["ssl.key.password"] = self.keyPassword.resolve()
        return out


class KafkaTopic(StrictModel):
    topic: Annotated[str, Field(pattern=_TOPIC)]
    definition: Annotated[str, Field(min_length=1)]
    # true: the topic carries whole snapshots framed by the ol-dagster-snapshot headers
    snapshot: bool = False


class KafkaSettings(StrictModel):
    bootstrapServers: Annotated[list[Annotated[str, Field(min_length=1)]], Field(min_length=1)]
    groupId: Annotated[str, Field(min_length=1)] = "ol-dagster"
    clientId: Annotated[str, Field(min_length=1)] = "ol-dagster"
    security: KafkaSecurity = KafkaSecurity()
    topics: Annotated[list[KafkaTopic], Field(min_length=1)]
    # where a group with no committed offset starts in a partition
    startFrom: Literal["earliest", "latest"] = "earliest"
    maxPollMessages: Annotated[int, Field(ge=1, le=100_000)] = 500  # per store transaction
    pollTimeoutSeconds: Annotated[float, Field(gt=0)] = 1.0
    sessionTimeoutSeconds: Annotated[float, Field(ge=1)] = 45.0
    deadLetterMaxBytes: Annotated[int, Field(ge=0)] = 65_536  # of a rejected message's bytes
    # what one open snapshot (no end marker yet) may hold in the consumer's memory; beyond, what
    # it holds is stored as a batch that is not a snapshot. The bytes: the receiver's default
    # limits.maxBodyBytes, the most a snapshot posted over HTTP carries; the messages: its
    # default limits.maxEventsPerBatch.
    maxSnapshotBytes: Annotated[int, Field(ge=1024)] = 64 * 1024 * 1024
    maxSnapshotEvents: Annotated[int, Field(ge=1)] = 100_000
    # an open snapshot that reads no message for this long is stored so too (its producer
    # stopped before the end marker)
    maxSnapshotIdleSeconds: Annotated[float, Field(gt=0)] = 600.0
    # other librdkafka consumer properties; a secret's value as {env: NAME}
    properties: dict[str, str | int | float | bool | KafkaSecret] = {}

    @field_validator("bootstrapServers", mode="before")
    @classmethod
    def _split(cls, value: object) -> object:
        if isinstance(value, str):  # "host1:9092,host2:9092", as Kafka's own tools take it
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("properties")
    @classmethod
    def _no_secrets(cls, value: dict[str, object]) -> dict[str, object]:
        for key, item in value.items():
            if key.lower() in _OWN_PROPERTIES:
                raise ValueError(
                    f"{key!r} is set by ol-dagster: use {_OWN_PROPERTIES[key.lower()]}"
                )
            if _SECRET_PROPERTY.search(key) and not isinstance(item, KafkaSecret):
                raise ValueError(
                    f"{key!r} would hold a secret in the file: write its value as {_AS_ENV}, "
                    "read from the environment when the consumer starts"
                )
        return value

    @model_validator(mode="after")
    def _one_entry_per_topic(self) -> KafkaSettings:
        seen: dict[str, int] = {}
        for i, t in enumerate(self.topics):
            if t.topic in seen:
                raise ValueError(
                    f"topics.{i}.topic: {t.topic!r} is already topics.{seen[t.topic]}: a topic "
                    "feeds one definition"
                )
            seen[t.topic] = i
        return self

    def check_definitions(self, snapshot_modes: Mapping[str, str]) -> None:
        """Every topic names a definition of the file (``snapshot_modes``: name -> its
        snapshotMode), and a snapshot topic a BATCH_SNAPSHOT one (an ADDITIVE definition never
        cleans against a snapshot). Raises ValueError naming the key."""
        for i, t in enumerate(self.topics):
            if t.definition not in snapshot_modes:
                known = ", ".join(snapshot_modes) or "none"
                raise ValueError(
                    f"kafka.topics.{i}.definition: {t.definition!r} is not a definition "
                    f"(known: {known})"
                )
            if t.snapshot and snapshot_modes[t.definition] != "BATCH_SNAPSHOT":
                raise ValueError(
                    f"kafka.topics.{i}.snapshot: definition {t.definition!r} is "
                    f"{snapshot_modes[t.definition]}; a snapshot topic needs snapshotMode: "
                    "BATCH_SNAPSHOT"
                )

    def secrets(self) -> list[KafkaSecret]:
        """Every secret this block names, so an error that quotes one can be scrubbed."""
        named = [self.security.password, self.security.keyPassword]
        named += [v for v in self.properties.values() if isinstance(v, KafkaSecret)]
        return [s for s in named if s is not None]

    def topic(self, name: str) -> KafkaTopic:
        for t in self.topics:
            if t.topic == name:
                return t
        raise KeyError(name)

    def consumer_config(self) -> dict[str, object]:
        """The confluent-kafka consumer's configuration, secrets resolved (never log it)."""
        session_ms = int(self.sessionTimeoutSeconds * 1000)
        return {
            # librdkafka's 3 s heartbeat outlives a session shorter than 9 s: a third of it
            "heartbeat.interval.ms": min(3000, session_ms // 3),
            **{
                k: v.resolve() if isinstance(v, KafkaSecret) else v
                for k, v in self.properties.items()
            },
            "bootstrap.servers": ",".join(self.bootstrapServers),
            "group.id": self.groupId,
            "client.id": self.clientId,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": self.startFrom,
            "session.timeout.ms": session_ms,
            **self.security.config(),
        }
