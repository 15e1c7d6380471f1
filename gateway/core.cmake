# Included from gateway/CMakeLists.txt: the router, catalog, cache clients and admin service
# (rc_gateway), and their tests.
add_library(rc_gateway STATIC
  ${CMAKE_CURRENT_LIST_DIR}/router.cc
  ${CMAKE_CURRENT_LIST_DIR}/router_membership.cc
  ${CMAKE_CURRENT_LIST_DIR}/router_follow.cc
  ${CMAKE_CURRENT_LIST_DIR}/router_vdis.cc
  ${CMAKE_CURRENT_LIST_DIR}/piece_pool.cc
  ${CMAKE_CURRENT_LIST_DIR}/qos.cc
  ${CMAKE_CURRENT_LIST_DIR}/qos_reserve.cc
  ${CMAKE_CURRENT_LIST_DIR}/cache_client.cc
  ${CMAKE_CURRENT_LIST_DIR}/data_channel.cc
  ${CMAKE_CURRENT_LIST_DIR}/admin_service.cc
  ${CMAKE_CURRENT_LIST_DIR}/admin_nodes.cc
  ${CMAKE_CURRENT_LIST_DIR}/drain_watch.cc
  ${CMAKE_CURRENT_LIST_DIR}/admin_cluster.cc
  ${CMAKE_CURRENT_LIST_DIR}/frontends.cc)
target_link_libraries(rc_gateway PUBLIC rc_nbd rc_datanode_client rc_ring rc_proto rc_membership
                                         rc_coordinator rc_catalog
                                         CLI11::CLI11)

add_executable(ringcache-gateway ${CMAKE_CURRENT_LIST_DIR}/main.cc)
target_link_libraries(ringcache-gateway PRIVATE rc_gateway rc_gateway_cluster CLI11::CLI11 spdlog::spdlog)

# Cluster mode (etcd): the gateway follows the cache ring and the VDI catalog that the coordinator
# publishes, and stands for election as the coordinator (coordinator/).
add_library(rc_gateway_cluster STATIC ${CMAKE_CURRENT_LIST_DIR}/cluster_follower.cc
            ${CMAKE_CURRENT_LIST_DIR}/qos_sessions.cc)
target_link_libraries(rc_gateway_cluster PUBLIC rc_gateway rc_coordinator_role rc_membership)

rc_add_gtest(router_membership_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/router_membership_test.cc
             LIBS rc_gateway rc_local_client rc_embedded_datanodes)

rc_add_gtest(router_epoch_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/router_epoch_test.cc
             LIBS rc_gateway rc_local_client rc_embedded_datanodes)

rc_add_gtest(piece_pool_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/piece_pool_test.cc LIBS rc_gateway
             SANITIZER)

rc_add_gtest(drain_watch_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/drain_watch_test.cc LIBS rc_gateway
             SANITIZER)
rc_add_gtest(qos_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/qos_test.cc LIBS rc_gateway SANITIZER)
rc_add_gtest(qos_sessions_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/qos_sessions_test.cc
                                       ${CMAKE_SOURCE_DIR}/membership/etcd_test_server.cc
             LIBS rc_gateway_cluster LABEL cluster)
target_compile_definitions(qos_sessions_test PRIVATE RINGCACHE_ETCD_BIN="${ETCD_BINARY}")

rc_add_gtest(data_channel_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/data_channel_test.cc
             LIBS rc_gateway rc_cachenode rc_embedded_datanodes SANITIZER)


rc_add_gtest(cache_client_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/cache_client_test.cc LIBS rc_gateway
             SANITIZER)
rc_add_gtest(qos_reserve_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/qos_reserve_test.cc LIBS rc_gateway
             SANITIZER)
