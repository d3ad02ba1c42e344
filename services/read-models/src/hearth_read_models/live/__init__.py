"""The live page and its websocket: a home's twins, then every change as the projector publishes it (the
package's docstring says what each folder may import)."""
