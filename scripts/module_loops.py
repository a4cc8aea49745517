#!/usr/bin/env python3
"""Finds import loops between the modules of each crate (issue 64: "no import loop and no upward
import inside any crate"; with no loop, the modules sort into floors where every import points down,
so a loop is exactly what makes an import point up).

A module is a file under crates/*/src and xtask/src (`lib.rs`/`main.rs` the crate root, `mod.rs` its
directory). Module A imports module B when A's code names a path `crate::…`, `super::…` or `self::…`
that resolves to B or to an item B defines. A file's `#[cfg(test)] mod …` (its unit tests, at the
end of the file) is left out: tests may use what sits above the code they test.
The crate root only declares modules and re-exports their items, so its `pub use` lines do not count
as imports; a path through a root re-export (`crate::Item`) counts as an import of the module the
item comes from. A module's own submodules and its parent (`super::*` of an inline test module) are
the same file or a declaration, not imports.

Prints every loop as `crate: a -> b -> a` and exits 1 when there is one; `--floors` also prints each
crate's floors (modules that import nothing of the crate first). Run from the repository root.
"""
import pathlib
import re
import sys

PATH = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")
USE_GROUP = re.compile(r"\buse\s+(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)*)::\{([^;]*)\};", re.S)
ROOT_REEXPORT = re.compile(r"\bpub\s+use\s+([a-z_][a-z0-9_]*)((?:::[A-Za-z_][A-Za-z0-9_]*)*)::(\{[^;]*\}|[A-Za-z_][A-Za-z0-9_]*);", re.S)


def module_of(src: pathlib.Path, file: pathlib.Path) -> tuple:
    parts = list(file.relative_to(src).with_suffix("").parts)
    if parts[-1] in ("lib", "main", "mod"):
        parts = parts[:-1]
    return tuple(parts)


def strip_comments_and_tests(text: str) -> str:
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    tests = re.search(r"#\[cfg\(test\)\](\s*#\[[^\]]*\])*\s*(pub(\([a-z]+\))?\s+)?mod\s", text)
    return text[: tests.start()] if tests else text


def crate_graph(src: pathlib.Path):
    files = {module_of(src, f): f for f in sorted(src.rglob("*.rs"))}
    modules = set(files)
    texts = {m: strip_comments_and_tests(f.read_text()) for m, f in files.items()}
    # Items the root re-exports: name -> module it comes from.
    reexports = {}
    root = texts.get((), "")
    for head, rest, items in ROOT_REEXPORT.findall(root):
        module = (head,) + tuple(p for p in rest.split("::") if p)
        names = re.findall(r"[A-Za-z_][A-Za-z0-9_]*", items)
        for name in names:
            reexports[name] = module
    graph = {m: set() for m in modules}
    for module, text in texts.items():
        if module == ():
            continue
        paths = []
        for anchor, rest, group in USE_GROUP.findall(text):
            for item in re.findall(r"[A-Za-z_][A-Za-z0-9_:]*", group):
                paths.append((anchor, rest + "::" + item))
        paths += PATH.findall(text)
        for anchor, rest in paths:
            parts = [p for p in rest.split("::") if p]
            if anchor == "crate":
                base = ()
            elif anchor == "super":
                base = module[:-1]
                while parts and parts[0] == "super":
                    base, parts = base[:-1], parts[1:]
            else:
                base = module
            target = base
            for part in parts:
                if target + (part,) in modules:
                    target = target + (part,)
                else:
                    if target == () and part in reexports:
                        target = reexports[part]
                    break
            # Ancestors (a test module's `super::*`) and descendants are the same file or its
            # declarations.
            if target == module or module[: len(target)] == target or target[: len(module)] == module:
                continue
            if target in modules:
                graph[module].add(target)
    return graph


def loops(graph):
    """Strongly connected components with more than one module (Tarjan), each as a cycle path."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def floors(graph):
    level = {}

    def floor(v, seen=()):
        if v in level:
            return level[v]
        if v in seen:
            return 0
        level[v] = 1 + max((floor(w, seen + (v,)) for w in graph[v]), default=-1)
        return level[v]

    for v in graph:
        floor(v)
    return level


def name(module):
    return "::".join(module) or "(root)"


def main():
    show_floors = "--floors" in sys.argv
    roots = sorted(pathlib.Path("crates").glob("*/src")) + [pathlib.Path("xtask/src")]
    bad = 0
    for src in roots:
        crate = src.parent.name
        graph = crate_graph(src)
        for component in loops(graph):
            bad += 1
            members = set(component)
            edges = [f"{name(a)} -> {name(b)}" for a in component for b in sorted(graph[a]) if b in members]
            print(f"{crate}: import loop among {', '.join(name(m) for m in component)} ({'; '.join(edges)})")
        if show_floors:
            level = floors(graph)
            top = max(level.values(), default=0)
            print(f"{crate}: {len(graph)} modules on {top + 1} floors")
    if bad:
        print(f"{bad} import loop(s)")
        return 1
    print(f"no import loop in {len(roots)} crates")
    return 0


if __name__ == "__main__":
    sys.exit(main())
