"""reclaim's operator faces: the `reclaim` CLI and the Textual console."""
