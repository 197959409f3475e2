# The git revision is baked in at configure time so every report names the exact source it ran.
execute_process(
  COMMAND git rev-parse --short=12 HEAD
  WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}
  OUTPUT_VARIABLE TRAINPROOF_GIT_REVISION
  OUTPUT_STRIP_TRAILING_WHITESPACE
  ERROR_QUIET)
if(NOT TRAINPROOF_GIT_REVISION)
  set(TRAINPROOF_GIT_REVISION "unknown")
endif()
execute_process(
  COMMAND git status --porcelain --untracked-files=no
  WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}
  OUTPUT_VARIABLE _trainproof_dirty
  OUTPUT_STRIP_TRAILING_WHITESPACE
  ERROR_QUIET)
if(_trainproof_dirty)
  string(APPEND TRAINPROOF_GIT_REVISION "-dirty")
endif()
