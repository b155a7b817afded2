// MetricsEndpoint serves a registry over real HTTP on loopback.
#include "common/metrics/http_endpoint.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <chrono>
#include <memory>

namespace specd::metrics {
namespace {

constexpr char kLoopback[] = "127.0.0.1";

std::unique_ptr<MetricsEndpoint> StartOrDie(const prometheus::Registry& registry, int port) {
  absl::StatusOr<std::unique_ptr<MetricsEndpoint>> endpoint =
      MetricsEndpoint::Start(registry, kLoopback, port);
  EXPECT_TRUE(endpoint.ok()) << endpoint.status();
  return endpoint.ok() ? std::move(*endpoint) : nullptr;
}

TEST(MetricsEndpoint, ServesTheExpositionOnGetMetrics) {
  prometheus::Registry registry;
  prometheus::Counter& requests = prometheus::BuildCounter()
                                      .Name("specd_requests_total")
                                      .Help("Requests served.")
                                      .Register(registry)
                                      .Add({});
  requests.Increment(5);
  std::unique_ptr<MetricsEndpoint> endpoint = StartOrDie(registry, 0);
  ASSERT_NE(endpoint, nullptr);
  ASSERT_GT(endpoint->port(), 0);
  httplib::Client client(kLoopback, endpoint->port());

  httplib::Result response = client.Get("/metrics");

  ASSERT_TRUE(response) << httplib::to_string(response.error());
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(response->body, R"(# HELP specd_requests_total Requests served.
# TYPE specd_requests_total counter
specd_requests_total 5
)");
}

TEST(MetricsEndpoint, ServesCurrentValuesOnEveryScrape) {
  prometheus::Registry registry;
  prometheus::Gauge& running = prometheus::BuildGauge()
                                   .Name("specd_requests_running")
                                   .Help("In flight.")
                                   .Register(registry)
                                   .Add({});
  std::unique_ptr<MetricsEndpoint> endpoint = StartOrDie(registry, 0);
  ASSERT_NE(endpoint, nullptr);
  httplib::Client client(kLoopback, endpoint->port());

  running.Set(1);
  httplib::Result first = client.Get("/metrics");
  running.Set(4);
  httplib::Result second = client.Get("/metrics");

  ASSERT_TRUE(first && second);
  EXPECT_NE(first->body.find("specd_requests_running 1\n"), std::string::npos) << first->body;
  EXPECT_NE(second->body.find("specd_requests_running 4\n"), std::string::npos) << second->body;
}

TEST(MetricsEndpoint, AnswersOtherPathsWith404) {
  prometheus::Registry registry;
  std::unique_ptr<MetricsEndpoint> endpoint = StartOrDie(registry, 0);
  ASSERT_NE(endpoint, nullptr);
  httplib::Client client(kLoopback, endpoint->port());

  httplib::Result other = client.Get("/other");
  httplib::Result root = client.Get("/");

  ASSERT_TRUE(other && root);
  EXPECT_EQ(other->status, 404);
  EXPECT_EQ(root->status, 404);
}

TEST(MetricsEndpoint, FailsToStartOnAPortAlreadyInUse) {
  prometheus::Registry registry;
  std::unique_ptr<MetricsEndpoint> first = StartOrDie(registry, 0);
  ASSERT_NE(first, nullptr);

  absl::StatusOr<std::unique_ptr<MetricsEndpoint>> second =
      MetricsEndpoint::Start(registry, kLoopback, first->port());

  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable) << second.status();
}

TEST(MetricsEndpoint, RejectsPortOutsideTheValidRange) {
  prometheus::Registry registry;

  EXPECT_EQ(MetricsEndpoint::Start(registry, kLoopback, 70000).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MetricsEndpoint::Start(registry, kLoopback, -1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(MetricsEndpoint, DestructorStopsServingAndFreesThePort) {
  prometheus::Registry registry;
  std::unique_ptr<MetricsEndpoint> endpoint = StartOrDie(registry, 0);
  ASSERT_NE(endpoint, nullptr);
  const int port = endpoint->port();
  httplib::Client client(kLoopback, port);
  ASSERT_TRUE(client.Get("/metrics"));

  endpoint.reset();

  EXPECT_FALSE(client.Get("/metrics")) << "still serving after the destructor returned";
  std::unique_ptr<MetricsEndpoint> again = StartOrDie(registry, port);
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->port(), port);
}

// Prometheus keeps its scrape connection open between scrapes; shutdown must not wait on it.
TEST(MetricsEndpoint, DestructorReturnsPromptlyWhileAClientKeepsItsConnectionOpen) {
  prometheus::Registry registry;
  std::unique_ptr<MetricsEndpoint> endpoint = StartOrDie(registry, 0);
  ASSERT_NE(endpoint, nullptr);
  httplib::Client client(kLoopback, endpoint->port());
  client.set_keep_alive(true);
  ASSERT_TRUE(client.Get("/metrics"));

  const auto start = std::chrono::steady_clock::now();
  endpoint.reset();

  // httplib would hold an idle keep-alive connection for 5 s; the endpoint must not wait on it.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

}  // namespace
}  // namespace specd::metrics
