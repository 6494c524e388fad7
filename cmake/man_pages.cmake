# man_pages.cmake: writes pipelab's man pages, pipelab(1) and one pipelab-CMD(1) per subcommand,
# from the help texts of the built program, with help2man.
#
#   cmake -DPIPELAB=<program> -DHELP2MAN=<help2man> -DBASH=<bash> -DCOMPLETION=<pipelab.bash>
#         -DSUMMARY=<one line for pipelab(1)> -DOUT=<folder> -P man_pages.cmake
#
# The subcommands and their one-line summaries are the "commands:" of `pipelab --help`, read
# with the bash completion's own reader (_pipelab_entries), so the pages, the completion and the
# program list the same commands. Each page is help2man's rendering of `pipelab [CMD] --help`,
# whose first word "usage:" becomes "Usage:" so that help2man makes it the SYNOPSIS; its version
# is `pipelab --version`'s. OUT ends up holding exactly the pages (stale ones removed) and
# pages.stamp, the build's record that they are current.

# Runs the program with the arguments in ARGN and leaves its standard output in VAR (VAR "-":
# the output is not wanted and may be empty); stops the build when it fails or, where the output
# is wanted, prints nothing, since a page made from that would be empty.
function(pl_man_run var)
  execute_process(COMMAND ${ARGN} OUTPUT_VARIABLE _out RESULT_VARIABLE _rc ERROR_VARIABLE _err)
  if(NOT _rc EQUAL 0 OR (NOT var STREQUAL "-" AND _out STREQUAL ""))
    string(REPLACE ";" " " _cmd "${ARGN}")
    message(FATAL_ERROR "man pages: `${_cmd}` failed (${_rc}): ${_err}")
  endif()
  set(${var} "${_out}" PARENT_SCOPE)
endfunction()

# Writes OUT/PAGE.1 from the help text HELP: the page's program name is PAGE, NAME says
# WHAT, and SEE_ALSO is the roff text of its SEE ALSO section.
function(pl_man_page page what help see_also)
  string(REGEX REPLACE "^usage:" "Usage:" help "${help}")
  file(WRITE "${OUT}/${page}.help" "${help}")
  # NAME comes through the include file: an argument would split at a ';' of WHAT
  file(WRITE "${OUT}/${page}.h2m" "[NAME]\n${page} \\- ${what}\n[SEE ALSO]\n${see_also}\n")
  # help2man prints the text `cat FILE` gives as the program's --help
  pl_man_run(- ${HELP2MAN} --no-info --section=1
             "--version-string=${page} ${VERSION}"
             "--help-option='${OUT}/${page}.help'" "--include=${OUT}/${page}.h2m"
             "--output=${OUT}/${page}.1" cat)
  file(REMOVE "${OUT}/${page}.help" "${OUT}/${page}.h2m")
endfunction()

file(MAKE_DIRECTORY "${OUT}")
file(GLOB _stale "${OUT}/*.1")
if(_stale)
  file(REMOVE ${_stale})
endif()

# the version after the program name, without the git revision: "0.1.0" of "pipelab 0.1.0 (abc1234)"
pl_man_run(_version "${PIPELAB}" --version)
string(REGEX REPLACE "^[^ ]+ ([^ \n]+).*$" "\\1" VERSION "${_version}")

# the subcommands, "NAME<TAB>SUMMARY" lines
pl_man_run(_entries ${BASH} -c ". \"$0\" && \"$1\" --help | _pipelab_entries commands"
           "${COMPLETION}" "${PIPELAB}")
string(REGEX REPLACE "\n$" "" _entries "${_entries}")
string(REPLACE ";" "\\;" _entries "${_entries}")  # a summary's ';' stays in its entry
string(REPLACE "\n" ";" _entries "${_entries}")

set(_main_see "")  # ".BR pipelab-CMD (1)" per subcommand
foreach(_e IN LISTS _entries)
  string(REGEX MATCH "^([^\t]+)\t(.*)$" _ "${_e}")
  set(_cmd "${CMAKE_MATCH_1}")
  pl_man_run(_help "${PIPELAB}" ${_cmd} --help)
  pl_man_page(pipelab-${_cmd} "${CMAKE_MATCH_2}" "${_help}" ".BR pipelab (1)")
  list(APPEND _main_see ".BR pipelab\\-${_cmd} (1)")
endforeach()
list(JOIN _main_see ",\n" _main_see)
pl_man_run(_help "${PIPELAB}" --help)
pl_man_page(pipelab "${SUMMARY}" "${_help}" "${_main_see}")
file(WRITE "${OUT}/pages.stamp" "")
