"""One module per executor, named for it (`--executor NAME`); each registers itself with
`EXECUTOR = ExecutorKind(NAME, Settings, open)`. `labcoat.runner._executor` lists this
package to find them, so a new executor is a new module here plus its test."""
