from tests.infra.synth import cloud_assembly, template_json  # noqa: F401  (session fixtures)
