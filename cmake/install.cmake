# Install rules and the package files users find wte with (included by CMakeLists.txt when
# WTE_INSTALL is on). After `cmake --install build --prefix P`:
#   P/bin/wte                                   the command-line tool
#   P/include/wte/*.h                           the public headers (#include <wte/kernels.h>)
#   P/lib/libwte_kernels.a, P/lib/libwte.a      wte::kernels, wte::wte
#   P/lib/cmake/wte/wteConfig.cmake (+ Version, Targets)   find_package(wte [COMPONENTS kernels])
#   P/lib/pkgconfig/wte.pc, wte-kernels.pc      pkg-config --cflags --libs wte
#   P/lib/python3.X/dist-packages/wte/          the Python module, if built (python/CMakeLists.txt)
include(CMakePackageConfigHelpers)
set(WTE_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/wte)

# Installs what was built: a target that was not (`--target wte_python` builds no `wte`) is
# skipped with a line saying so, and the install still succeeds.
foreach(target wte wte_simd wte_core)
  install(CODE "
    if(NOT EXISTS \"$<TARGET_FILE:${target}>\")
      message(STATUS \"Skipping $<TARGET_FILE_NAME:${target}> (target ${target} not built): \"
              \"cmake --build ${PROJECT_BINARY_DIR} --target ${target} builds it\")
    endif()")
endforeach()
install(TARGETS wte RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} OPTIONAL)
# train.h is left out: its library, wte_train (train/), links MPI and is not installed; the `wte`
# tool and the Python module link it.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/wte DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h" PATTERN "train.h" EXCLUDE)
# Two export sets, so a user of wte::kernels alone needs only Highway's and OpenMP's packages.
install(TARGETS wte_simd EXPORT wteKernelsTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} OPTIONAL)
install(TARGETS wte_core EXPORT wteTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} OPTIONAL)
install(EXPORT wteKernelsTargets NAMESPACE wte:: DESTINATION ${WTE_CMAKE_DIR})
install(EXPORT wteTargets NAMESPACE wte:: DESTINATION ${WTE_CMAKE_DIR})

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/wteConfig.cmake.in
  ${PROJECT_BINARY_DIR}/wteConfig.cmake INSTALL_DESTINATION ${WTE_CMAKE_DIR})
# 0.x: a minor version may change the API, so only the same major.minor is compatible.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/wteConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/wteConfig.cmake ${PROJECT_BINARY_DIR}/wteConfigVersion.cmake
        DESTINATION ${WTE_CMAKE_DIR})

# pkg-config: the libraries are static, so Libs carries every library they need (Requires names
# the dependencies that ship a .pc file; oneDNN, Boost and HDF5's C++ library do not).
get_target_property(WTE_DNNL_CONFIGS DNNL::dnnl IMPORTED_CONFIGURATIONS)
list(GET WTE_DNNL_CONFIGS 0 WTE_DNNL_CONFIG)  # Debian's: RELWITHDEBINFO
get_target_property(WTE_DNNL_LOCATION DNNL::dnnl IMPORTED_LOCATION_${WTE_DNNL_CONFIG})
# By name (-ldnnl), not by the versioned file CMake found (libdnnl.so.2.6), so the file keeps
# working when a package update changes the version; -L only for directories the linker does not
# search by itself (Debian's HDF5 lives in hdf5/serial/).
set(WTE_PC_PRIVATE_LIBS "")
set(wte_pc_dirs "")
foreach(lib ${WTE_DNNL_LOCATION} ${Boost_PROGRAM_OPTIONS_LIBRARY_RELEASE} ${WTE_HDF5_LIBRARIES})
  get_filename_component(dir ${lib} DIRECTORY)
  get_filename_component(file ${lib} NAME)
  string(REGEX REPLACE "^lib" "" name ${file})
  string(REGEX REPLACE "\\.(so|a)(\\..*)?$" "" name ${name})
  if(NOT dir IN_LIST CMAKE_CXX_IMPLICIT_LINK_DIRECTORIES AND NOT dir IN_LIST wte_pc_dirs)
    list(APPEND wte_pc_dirs ${dir})
    string(APPEND WTE_PC_PRIVATE_LIBS " -L${dir}")
  endif()
  string(APPEND WTE_PC_PRIVATE_LIBS " -l${name}")
endforeach()
# prefix is found from the .pc file's own place (${pcfiledir}), so `cmake --install --prefix P`
# gives a working file wherever P is.
file(RELATIVE_PATH WTE_PC_TO_PREFIX /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
foreach(pc wte wte-kernels)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/${pc}.pc.in ${PROJECT_BINARY_DIR}/${pc}.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/${pc}.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endforeach()
