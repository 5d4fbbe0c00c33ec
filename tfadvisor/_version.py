"""The package version (one place; ``pyproject.toml`` reads it from here) and the version of the JSON
contract every ``--format json`` document carries (``tfadvisor/report/schema.py`` says the policy)."""

__version__ = "0.1.0"

#: The JSON contract's major version: renaming or removing a key bumps it.
SCHEMA_VERSION = 1
#: The JSON contract's minor version: adding a key bumps it.
SCHEMA_MINOR = 5


def schema_fields() -> dict[str, int]:
    """The two keys every JSON document starts with."""
    return {"schema_version": SCHEMA_VERSION, "schema_minor": SCHEMA_MINOR}
