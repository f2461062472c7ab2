"""durastate: durable Harel statecharts for Python, serverless on AWS."""

__version__ = "0.1.0"
