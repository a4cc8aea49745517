#!/usr/bin/env python3
"""Writes (or, with --check, verifies) crates/workspace-hack/Cargo.toml: one feature set per
dependency whichever package is built (issue 63 item 3; docs/build-time.md).

Cargo resolves features for the packages it is asked to build, so `cargo test -p tint-aux` after
`cargo test --workspace` would build burn, syn and a few dozen other dependencies again with fewer
features. Every member takes `workspace-hack` as a dev-dependency (tests and examples only: a
library user's build is unchanged), and the hack depends on every package whose features differ
between the workspace and some member alone, with the workspace's features: host packages
(proc-macro parsers) as build-dependencies, the rest, and the light members (LIGHT_MEMBERS below),
as dependencies.

    python3 scripts/workspace_hack.py          # rewrite the hack's manifest
    python3 scripts/workspace_hack.py --check  # exit 1 naming each member that alone resolves
                                               # other features than the workspace (CI)
"""
import collections
import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
HACK = ROOT / "crates" / "workspace-hack" / "Cargo.toml"
# Packages built only for the host (proc-macro parsers): build-dependencies of the hack, so that they
# unify with the proc-macros' copies and add no target copy.
HOST_ONLY = {"syn", "proc-macro2", "quote"}
# Members the hack may depend on to unify their own features: those that depend on no other member
# (a dev-dependency cycle through the hack is allowed; a heavier member would make every member's
# tests build it). Another member whose features differ enables them in its own tests with a
# dev-dependency on itself (tint-eval does, for `clap`).
LIGHT_MEMBERS = {"tint-assets"}


def tree(args):
    """{(name, version): features} of the packages cargo resolves for `args` (tests included)."""
    out = subprocess.run(
        ["cargo", "tree", "-e", "normal,build,dev", "-f", "{p}|{f}", "--prefix", "none", *args],
        cwd=ROOT, capture_output=True, text=True, check=True).stdout
    found = {}
    for line in out.splitlines():
        line = line.replace(" (*)", "").strip()
        if "|" not in line:
            continue
        package, features = line.split("|", 1)
        words = package.split()
        if len(words) > 2 and words[2].startswith("("):  # a path package: a member or vendor/
            if not words[2].startswith(f"({ROOT}/crates/"):
                continue
            key = (words[0], "path")
        else:
            key = (words[0], words[1].lstrip("v"))
        found.setdefault(key, set()).update(f for f in features.split(",") if f)
    return found


def members():
    out = subprocess.run(["cargo", "metadata", "--no-deps", "--format-version", "1"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    return sorted(p["name"] for p in json.loads(out)["packages"] if p["name"] != "workspace-hack")


def differences():
    """{member: [(name, version, missing features)]}: what `cargo test -p MEMBER` would build with
    other features than `cargo test --workspace`."""
    workspace = tree(["--workspace"])
    found = {}
    for member in members():
        differ = [(name, version, sorted(workspace[(name, version)] - features))
                  for (name, version), features in sorted(tree(["-p", member]).items())
                  if workspace.get((name, version), set()) != features]
        if differ:
            found[member] = differ
    return found, workspace


def manifest(needed):
    names = collections.Counter(name for name, _ in needed)
    lines = {"dependencies": [], "build-dependencies": []}
    for (name, version), features in sorted(needed.items()):
        alias = name if names[name] == 1 else name + "-" + "-".join(version.split(".")[:2])
        spec = [f'path = "../{name}"'] if version == "path" else [f'version = "={version}"']
        if alias != name:
            spec.insert(0, f'package = "{name}"')
        if "default" not in features:
            spec.append("default-features = false")
        listed = sorted(features - {"default"})
        if listed:
            spec.append("features = [" + ", ".join(f'"{f}"' for f in listed) + "]")
        section = "build-dependencies" if name in HOST_ONLY else "dependencies"
        lines[section].append(f"{alias} = {{ {', '.join(spec)} }}")
    return "\n".join([
        "# Written by scripts/workspace_hack.py (do not edit; CI checks the result with --check).",
        "# One feature set per dependency whichever package is built (issue 63; docs/build-time.md):",
        "# every member takes this crate as a dev-dependency, and it depends on each external package",
        "# whose features would otherwise differ between `cargo test --workspace` and `cargo test -p",
        "# MEMBER`, with the workspace's features.",
        "[package]",
        'name = "workspace-hack"',
        'description = "Unifies dependency features across the workspace\'s members (tests and examples only)."',
        "version.workspace = true",
        "edition.workspace = true",
        "license.workspace = true",
        "publish = false",
        "",
        "[dependencies]",
        *lines["dependencies"],
        "",
        "[build-dependencies]",
        *lines["build-dependencies"],
        "",
    ])


def main():
    if "--check" in sys.argv[1:]:
        found, _ = differences()
        for member, differ in found.items():
            shown = ", ".join(f"{n} {v} (+{'+'.join(f) or 'fewer'})" for n, v, f in differ)
            sys.stderr.write(f"cargo test -p {member} would build with other features: {shown}\n")
        if found:
            sys.stderr.write("run python3 scripts/workspace_hack.py (a dependency or its features "
                             "changed) and commit crates/workspace-hack/Cargo.toml\n")
            return 1
        print("one feature set per dependency: every member alone resolves the workspace's features")
        return 0
    # Measure without the hack's unification: an empty hack first, then the hack that fills the gaps,
    # again until nothing differs (a package the hack adds can pull another with fewer features).
    HACK.parent.mkdir(parents=True, exist_ok=True)
    needed = {}
    for _ in range(5):
        HACK.write_text(manifest(needed))
        found, workspace = differences()
        if not found:
            print(f"wrote {HACK.relative_to(ROOT)}: {len(needed)} packages")
            return 0
        for member, differ in found.items():
            for name, version, _ in differ:
                if version == "path" and name not in LIGHT_MEMBERS:
                    sys.stderr.write(
                        f"cargo test -p {member} builds the member {name} with other features: "
                        f"enable {sorted(workspace[(name, version)])} in a dev-dependency of "
                        f"{name} on itself (the hack only unifies {sorted(LIGHT_MEMBERS)})\n")
                    return 1
                needed[(name, version)] = workspace[(name, version)]
    sys.stderr.write("the features did not settle in 5 rounds; see --check\n")
    return 1


if __name__ == "__main__":
    sys.exit(main())
