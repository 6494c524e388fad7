#!/usr/bin/env bash
# check.sh: checks pipelab as installed by `cmake --install`, used the way a user would, from a
# directory outside the source and build trees.
#
#   check.sh setup BUILD PREFIX         cmake --install BUILD --prefix PREFIX (PREFIX emptied first)
#   check.sh program BUILD PREFIX       the installed program runs: version, a schedule, a hardware
#                                       preset, a figure from its gnuplot templates, a real run
#                                       (the executor module, installed in LIBDIR/pipelab/)
#   check.sh man BUILD PREFIX ON|OFF    every subcommand's man page renders and names its flags
#                                       (exit 77, skipped: no `man`, or built without help2man)
#   check.sh completion BUILD PREFIX    the bash completion completes subcommands, flags and flag
#                                       values, and every flag it offers is one the program takes
# Exits 0 when every check holds, 1 naming the first that does not, 77 when skipped.
set -euo pipefail

mode=$1 build=$2 prefix=$3
bin=$prefix/bin/pipelab
completion=$prefix/share/bash-completion/completions/pipelab
mandir=$prefix/share/man

# Prints "install check failed: WHAT" and stops with status 1.
fail() {
    echo "install check failed: $*" >&2
    exit 1
}

# Fails unless the text TEXT contains the string WANT (named WHAT in the message).
expect_in() {
    local what=$1 want=$2 text=$3
    [[ $text == *"$want"* ]] || fail "$what: no '$want' in:"$'\n'"$text"
}

# Moves into a fresh directory outside the source and build trees, removed on exit.
enter_scratch() {
    scratch=$(mktemp -d)
    trap 'rm -rf "$scratch"' EXIT
    cd "$scratch"
}

# Installs into PREFIX and checks that the program, the man pages (when built) and the
# completion script landed where the README says.
check_setup() {
    rm -rf "$prefix"
    cmake --install "$build" --prefix "$prefix" >/dev/null || fail "cmake --install $build --prefix $prefix"
    [[ -x $bin ]] || fail "no program at $bin"
    [[ -f $completion ]] || fail "no bash completion at $completion"
}

# Runs the installed program from a scratch directory: nothing it reads may come from the
# source tree (the hardware presets and gnuplot templates are compiled in).
check_program() {
    enter_scratch
    local out
    out=$("$bin" --version) || fail "pipelab --version"
    [[ $out =~ ^pipelab\ [0-9]+\.[0-9]+\.[0-9]+\ \( ]] || fail "pipelab --version printed '$out'"
    out=$("$bin" schedule --kind 1f1b --ranks 2 --microbatches 2) || fail "pipelab schedule"
    # 1F1B on p = 2 ranks with m = 2 microbatches idles (p-1)/(m+p-1) = 1/3 of each rank's steps
    expect_in "pipelab schedule" "bubble fraction 0.3333" "$out"
    out=$("$bin" model --model mlp:width=64,depth=4,microbatch=2 --hardware h100 --stages 2) ||
        fail "pipelab model --hardware h100 (a preset)"
    expect_in "pipelab model --hardware h100" "stage" "$out"
    "$bin" simulate --kind zb-h1 --ranks 2 --microbatches 4 --trace --db runs.db >/dev/null ||
        fail "pipelab simulate --db runs.db"
    # run and profile load the executor module from LIBDIR/pipelab/, found from the program's folder
    out=$("$bin" run --kind 1f1b --ranks 2 --microbatches 2 --width 16 --depth 2 --timed 1 --oversubscribe \
        --db runs.db 2>&1) || fail "pipelab run (the installed executor module): $out"
    expect_in "pipelab run" "measured run 2, simulated run 3 in runs.db" "$out"
    if ! command -v gnuplot >/dev/null; then
        echo "(gnuplot not on PATH: the figure check is skipped)" >&2
        return 0
    fi
    "$bin" plot timeline 1 --db runs.db -o fig.png >/dev/null || fail "pipelab plot timeline"
    [[ -s fig.png && -s fig.gp ]] || fail "pipelab plot timeline wrote no fig.png and fig.gp"
}

# Renders every man page with man -l (pipelab(1) and pipelab-CMD(1) for each subcommand that
# `pipelab --help` lists) and checks that each names its subcommand and every flag of its
# --help; then finds pipelab-simulate(1) by name under PREFIX's man folder, as `man` would.
check_man() {
    local built=$1 cmd page text flag
    [[ $built == ON ]] || { echo "built without help2man: no man pages to check" >&2; exit 77; }
    command -v man >/dev/null || { echo "man is not installed: man page check skipped" >&2; exit 77; }
    enter_scratch
    # plain text, no hyphenation, so that every flag reads whole
    export MANPAGER=cat MANWIDTH=100 LC_ALL=C.UTF-8
    # shellcheck source=/dev/null
    . "$completion"
    text=$(man --nh --nj -l "$mandir/man1/pipelab.1" 2>/dev/null) || fail "man -l pipelab.1"
    expect_in "pipelab(1)" "pipelab-simulate(1)" "$text"
    for cmd in $("$bin" --help | _pipelab_entries commands | cut -f1); do
        page=$mandir/man1/pipelab-$cmd.1
        [[ -f $page ]] || fail "no man page $page"
        text=$(man --nh --nj -l "$page" 2>/dev/null) || fail "man -l $page"
        expect_in "pipelab-$cmd(1)" "pipelab-$cmd - " "$text"
        expect_in "pipelab-$cmd(1)" "pipelab $cmd" "$text"
        for flag in $("$bin" "$cmd" --help | _pipelab_flags); do
            [[ $flag == --help ]] || expect_in "pipelab-$cmd(1)" "$flag" "$text"
        done
    done
    text=$(man --nh --nj -M "$mandir" pipelab-simulate 2>/dev/null) || fail "man -M $mandir pipelab-simulate"
    expect_in "man pipelab-simulate" "--microbatches M" "$text"
}

# Completes the words of a command line, the last being the one under the cursor, as bash does
# on TAB, and prints the candidates sorted, one a line.
complete_line() {
    local COMP_WORDS=("$@") COMP_CWORD=$(($# - 1)) COMPREPLY=()
    _pipelab
    printf '%s\n' "${COMPREPLY[@]}" | sort
}

# Fails unless completing the command line (all but the last argument) offers exactly the
# candidates in the last argument (space-separated, sorted).
expect_completion() {
    local want=${*: -1} got
    got=$(complete_line "${@:1:$#-1}" | tr '\n' ' ')
    [[ ${got% } == "$want" ]] || fail "completing '${*:1:$#-1}': got '${got% }', want '$want'"
}

# Sources the installed completion in this non-interactive bash and completes as on TAB; then
# hands every flag it offers, for every subcommand, to the program: none may be unknown to it.
check_completion() {
    enter_scratch
    PATH=$prefix/bin:$PATH
    # shellcheck source=/dev/null
    . "$completion"
    [[ $(complete -p pipelab) == *"-F _pipelab"* ]] || fail "the completion does not register _pipelab for pipelab"
    expect_completion pipelab sim simulate
    expect_completion pipelab simulate --mic "--microbatch-size --microbatches"
    expect_completion pipelab run --backend "" "cpu cuda"
    expect_completion pipelab db "" "export list merge show trace"
    expect_completion pipelab db list --tag x "" ""
    expect_completion pipelab schedule --kind 1f1b -o "" ""
    local cmd flag err n=0
    for cmd in $(complete_line pipelab ""); do
        [[ $cmd == -* ]] && continue
        for flag in $(complete_line pipelab "$cmd" -); do
            # FLAG, a value it may take, then an unknown flag: the program stops with a usage
            # error before doing anything, naming FLAG only when FLAG is unknown to it (only
            # that message counts here, so a sanitizer build need not look for leaks at exit)
            err=$(ASAN_OPTIONS=detect_leaks=0 "$bin" "$cmd" "$flag" x --pipelab-no-such-flag \
                2>&1 >/dev/null || true)
            [[ $err == *"option '$flag'"* ]] &&
                fail "completion offers $flag, which pipelab $cmd does not take: $err"
            n=$((n + 1))
        done
    done
    ((n > 100)) || fail "the completion offered only $n flags over all subcommands"
}

case $mode in
setup) check_setup ;;
program) check_program ;;
man) check_man "${4:-ON}" ;;
completion) check_completion ;;
*) fail "unknown mode '$mode' (setup, program, man, completion)" ;;
esac
