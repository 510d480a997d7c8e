#!/bin/sh
# Fail when a crate listed under [dependencies] in Cargo.toml is named nowhere in src/,
# tests/ or benches/: a dependency nobody uses is compiled for nothing.
set -eu
cd "$(dirname "$0")/.."
unused=0
for dep in $(sed -n '/^\[dependencies\]/,/^\[/{/^[A-Za-z0-9_-]* *=/s/ *=.*//p}' Cargo.toml); do
    name=$(printf '%s' "$dep" | tr - _)
    # Used means a path through the crate (`name::`), a `use name` or a macro `name!`.
    if ! grep -rqE -- "(^|[^A-Za-z0-9_])$name(::|!)|use $name([^A-Za-z0-9_]|\$)" src tests benches; then
        echo "unused dependency: $dep (named nowhere in src/, tests/ or benches/)" >&2
        unused=1
    fi
done
exit $unused
