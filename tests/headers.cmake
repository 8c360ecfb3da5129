# Headers: each public header compiles alone, as C11 and as C++11 (STYLE.md). The list is taken
# at configure time and CONFIGURE_DEPENDS re-runs the glob when a header is added; the compilers
# are called by tests/headers/check.sh at test time, so project() stays C-only.

file(GLOB LC_PUBLIC_HEADERS CONFIGURE_DEPENDS
  RELATIVE ${PROJECT_SOURCE_DIR}/include
  ${PROJECT_SOURCE_DIR}/include/*.h ${PROJECT_SOURCE_DIR}/include/lazycluster/*.h)

find_program(LC_CXX_FOR_HEADERS NAMES g++ c++ clang++ DOC "C++ compiler for the header check")
if(NOT LC_CXX_FOR_HEADERS)
  message(WARNING "No C++ compiler found: the headers test will fail (apt-get install -y g++)")
  set(LC_CXX_FOR_HEADERS g++)
endif()

add_test(NAME headers
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/headers/check.sh ${PROJECT_SOURCE_DIR}/include
    ${LC_PUBLIC_HEADERS})
set_tests_properties(headers PROPERTIES LABELS unit TIMEOUT 120
  ENVIRONMENT "CC=${CMAKE_C_COMPILER};CXX=${LC_CXX_FOR_HEADERS}")
