#!/usr/bin/env bash
# Retarget every citation of the external construction spec ("TINT_SPEC §X", "TINT_SPEC.md §X", bare
# "TINT_SPEC", with or without a path in front) to the in-repository docs/construction.md, whose
# section numbers mirror the old ones.
#
#   scripts/retarget_citations.sh            check, then rewrite the files in place
#   scripts/retarget_citations.sh --check    check only: list the citations and fail on a missing
#                                            section or a leftover mention; change nothing
#
# Scope: crates/, xtask/, docs/ and README.md (text files only; target/ skipped). Wording:
#   Rust / Python / other sources:  "docs/construction.md §X"
#   docs/*.md:                      "[construction.md](construction.md) §X"
#   README.md:                      "[docs/construction.md](docs/construction.md) §X"
#
# Fails (exit 1, nothing rewritten) if a cited section number does not exist as a numbered heading
# (`## N.` / `### N.M` / `#### N.M.K`) of docs/construction.md. Ranges ("§6.5–6.7") are checked at
# both ends and, when they share a major number, every minor number in between.
# Requires bash, grep and perl.
set -euo pipefail
cd "$(dirname "$0")/.."

doc=docs/construction.md
check_only=false
case "${1:-}" in
  --check) check_only=true ;;
  "") ;;
  *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

[[ -f $doc ]] || { echo "error: $doc not found (run from a checkout that has it)" >&2; exit 1; }

# Section numbers that exist: numbered headings of docs/construction.md.
present=$(grep -oE '^#{2,4} [0-9]+(\.[0-9]+)*' "$doc" | awk '{print $2}' | sort -u)

# Files that mention the old spec.
mapfile -t files < <(grep -rlI --exclude-dir=target --exclude-dir=.git -e 'TINT_SPEC' \
  crates xtask docs README.md 2>/dev/null | grep -vxF "$doc" | sort || true)
if ((${#files[@]} == 0)); then
  echo "no TINT_SPEC mention in crates/ xtask/ docs/ README.md: nothing to do"
  exit 0
fi

# Every cited section, as "file:line: N.M". A citation is "TINT_SPEC[.md] §A" optionally followed by
# more items: ", §B", " / §B", " and §B", or a range "–B" / "-B" / "–§B".
cited=$(perl -CSD -ne '
  while (/TINT_SPEC(?:\.md)?\s+(\x{a7}\d+(?:\.\d+)*(?:\s*(?:(?:,|\/|and)\s*\x{a7}|[\x{2013}-]\s*\x{a7}?)\d+(?:\.\d+)*)*)/g) {
    my $phrase = $1;
    my @items;
    # ranges first: expand A–B when A and B share the major number
    while ($phrase =~ /(\d+(?:\.\d+)*)\s*[\x{2013}-]\s*\x{a7}?(\d+(?:\.\d+)*)/g) {
      my ($a, $b) = ($1, $2);
      my ($am, $an) = split /\./, $a;
      my ($bm, $bn) = split /\./, $b;
      if (defined $an && defined $bn && $am == $bm && $an <= $bn) {
        push @items, "$am.$_" for $an .. $bn;
      }
    }
    push @items, $1 while $phrase =~ /(\d+(?:\.\d+)*)/g;
    my %seen;
    print "$ARGV:$.: $_\n" for grep { !$seen{$_}++ } @items;
  }
  close ARGV if eof;   # reset $. per file
' "${files[@]}")

missing=""
while IFS= read -r entry; do
  [[ -z $entry ]] && continue
  section=${entry##* }
  if ! grep -qxF "$section" <<<"$present"; then
    missing+="$entry"$'\n'
  fi
done <<<"$cited"

n_cites=$(grep -c . <<<"$cited" || true)
n_sections=$(awk '{print $NF}' <<<"$cited" | sort -u | tr '\n' ' ')
echo "files citing TINT_SPEC: ${#files[@]}; cited section numbers: $n_cites"
echo "distinct sections: $n_sections"

if [[ -n $missing ]]; then
  echo "error: sections cited but missing from $doc:" >&2
  printf '%s' "$missing" >&2
  exit 1
fi
echo "every cited section exists in $doc"

if $check_only; then
  printf '%s\n' "${files[@]}"
  exit 0
fi

for f in "${files[@]}"; do
  case $f in
    README.md) target='[docs/construction.md](docs/construction.md)' ;;
    docs/*.md) target='[construction.md](construction.md)' ;;
    *) target='docs/construction.md' ;;
  esac
  # An optional path in front ("../shared/docs/TINT_SPEC.md") is part of the mention.
  T="$target" perl -CSD -pi -e 's{(?:[\w.\-]*/)*TINT_SPEC(?:\.md)?}{$ENV{T}}g' "$f"
done

if left=$(grep -rnI --exclude-dir=target --exclude-dir=.git -e 'TINT_SPEC' crates xtask docs README.md); then
  echo "error: TINT_SPEC still mentioned after the rewrite:" >&2
  echo "$left" >&2
  exit 1
fi
echo "rewrote ${#files[@]} files; no TINT_SPEC mention left in crates/ xtask/ docs/ README.md"
