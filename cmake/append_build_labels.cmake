# Included by CTest (TEST_INCLUDE_FILES, after the files gtest_discover_tests wrote): gives every
# discovered GoogleTest entry of this tree the build's own labels (QEVICT_BUILD_LABELS, set by the
# including file: `sanitized`, `arm`) beside its own (`model` for integration_test, `unit` for
# the rest). gtest_discover_tests cannot take a list of labels itself: its PROPERTIES are split
# at every `;` on the way to the file it writes.
file(GLOB _qevict_test_files "${QEVICT_BUILD_DIR}/*_tests.cmake")
foreach(_file IN LISTS _qevict_test_files)
  set(_base unit)
  get_filename_component(_name "${_file}" NAME)
  if(_name MATCHES "^integration_test")
    set(_base model)
  endif()
  file(STRINGS "${_file}" _lines REGEX "^add_test\\(\\[=\\[")
  foreach(_line IN LISTS _lines)
    string(REGEX REPLACE "^add_test\\(\\[=\\[(.*)\\]=\\] .*" "\\1" _test "${_line}")
    set_tests_properties("${_test}" PROPERTIES LABELS "${_base};${QEVICT_BUILD_LABELS}")
  endforeach()
endforeach()
