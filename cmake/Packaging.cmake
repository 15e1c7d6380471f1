# Installation and the Debian package (docs/operations.md, "Install").
#
#   cmake --build build --target daemons && (cd build && cpack)   # -> build/ringcache_<v>_amd64.deb
#
# One package, `ringcache`: the daemons, ringcachectl and ringcache-local in /usr/bin, a systemd
# unit template per daemon (ringcache-ROLE@ID.service), /etc/ringcache/cluster.yaml (a whole
# cluster on one host, to start from) and /etc/default/ringcache-ROLE (more flags), both kept
# across upgrades as conffiles. The maintainer scripts (deploy/debian/) add the `ringcache` system
# user and /var/lib/ringcache; a removal keeps that state, a purge deletes it. Runtime
# dependencies come from dpkg-shlibdeps over the binaries.
include(GNUInstallDirs)

set(RC_INSTALLED_PROGRAMS ringcache-gateway ringcache-cachenode ringcache-datanode ringcachectl
    ringcache-local)
foreach(t ${RC_INSTALLED_PROGRAMS})
  if(NOT TARGET ${t})
    return()  # a component left out (RINGCACHE_SKIP_DIRS): no package
  endif()
endforeach()

install(TARGETS ${RC_INSTALLED_PROGRAMS} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
file(GLOB RC_UNITS ${CMAKE_SOURCE_DIR}/deploy/systemd/ringcache-*@.service)
install(FILES ${RC_UNITS} DESTINATION /lib/systemd/system)  # Debian 12: units under /lib
install(FILES ${CMAKE_SOURCE_DIR}/deploy/systemd/cluster.yaml DESTINATION /etc/ringcache)
foreach(role datanode cachenode gateway)
  install(FILES ${CMAKE_SOURCE_DIR}/deploy/systemd/default-${role} DESTINATION /etc/default
          RENAME ringcache-${role})
endforeach()
file(GLOB RC_DOCS ${CMAKE_SOURCE_DIR}/docs/*.md)
install(FILES ${CMAKE_SOURCE_DIR}/README.md ${RC_DOCS} DESTINATION ${CMAKE_INSTALL_DOCDIR})

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME ringcache)
set(CPACK_PACKAGE_VENDOR "ringcache")
set(CPACK_PACKAGE_CONTACT "ringcache developers <ringcache@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "distributed SSD cache tier for a block store, served over NBD")
set(CPACK_PACKAGE_DESCRIPTION
    "A gateway serves virtual disks over NBD and routes their blocks over a consistent-hash ring\n\
to SSD cache nodes (write-back with log replicas on the data nodes), which keep the durable\n\
copy in RocksDB. etcd holds the membership; every daemon serves Prometheus metrics.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "etcd-server, etcd-client")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "qemu-utils, libnbd-bin, prometheus")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${CMAKE_SOURCE_DIR}/deploy/debian/postinst ${CMAKE_SOURCE_DIR}/deploy/debian/prerm
    ${CMAKE_SOURCE_DIR}/deploy/debian/postrm ${CMAKE_SOURCE_DIR}/deploy/debian/conffiles)
include(CPack)
