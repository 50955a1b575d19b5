"""Live memory systems as retrievers: the protocol (:mod:`.protocol`), system files (:mod:`.file`), the adapter
kinds (:mod:`.python`, :mod:`.http`, :mod:`.mcp`) and glue for named third-party systems (:mod:`.adapters`).
The harness drives them over a dataset in :mod:`evalkit.engine.live`."""
