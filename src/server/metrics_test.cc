#include "server/metrics.h"

#include <gtest/gtest.h>

namespace qevict::server {
namespace {

bool Has(const std::string& text, const std::string& line) {
  return text.find(line + "\n") != std::string::npos;
}

TEST(MetricsTest, SumsActiveSlotsAndKeepsTotals) {
  ServerMetrics m(2);
  KvStats a;
  a.fp16_bytes = 100;
  a.quant_bytes = 10;
  a.promotions = 2;
  KvStats b;
  b.fp16_bytes = 50;
  b.meta_bytes = 5;
  b.evictions = 3;
  m.SlotStarted(0, 7);
  m.SlotStarted(1, 3);
  m.SlotProgress(0, 4, a);
  m.SlotProgress(1, 1, b);
  m.CountResponse("/v1/completions", 200);
  m.CountResponse("/v1/completions", 200);
  m.CountResponse("other", 404);
  SchedulerSnapshot s;
  s.slots = 2;
  s.active = 2;
  s.queued = 1;
  std::string text = m.RenderPrometheus(s, MemoryStats{});
  EXPECT_TRUE(Has(text, "qevict_kv_resident_bytes{tier=\"fp16\"} 150")) << text;
  EXPECT_TRUE(Has(text, "qevict_kv_resident_bytes{tier=\"quant\"} 10")) << text;
  EXPECT_TRUE(Has(text, "qevict_kv_resident_bytes{tier=\"meta\"} 5")) << text;
  EXPECT_TRUE(Has(text, "qevict_kv_promotions_total 2")) << text;
  EXPECT_TRUE(Has(text, "qevict_tokens_generated_total 5")) << text;
  EXPECT_TRUE(Has(text, "qevict_prompt_tokens_total 10")) << text;
  EXPECT_TRUE(Has(text, "qevict_queue_length 1")) << text;
  EXPECT_TRUE(Has(text, "qevict_requests_total{route=\"/v1/completions\",status=\"200\"} 2"));
  EXPECT_TRUE(Has(text, "qevict_requests_total{route=\"other\",status=\"404\"} 1"));

  // Finished runs leave the gauges and join the totals.
  m.SlotFinished(0, 6, 0.5, a);
  m.SlotFinished(1, 1, 0.1, b);
  text = m.RenderPrometheus(s, MemoryStats{});
  EXPECT_TRUE(Has(text, "qevict_kv_resident_bytes{tier=\"fp16\"} 0")) << text;
  EXPECT_TRUE(Has(text, "qevict_kv_promotions_total 2")) << text;
  EXPECT_TRUE(Has(text, "qevict_kv_evictions_total 3")) << text;
  EXPECT_TRUE(Has(text, "qevict_tokens_generated_total 7")) << text;
  EXPECT_TRUE(Has(text, "qevict_decode_tokens_per_second 11.6667")) << text;
}

}  // namespace
}  // namespace qevict::server
