// The double reference model built from a float32 model (src/analysis/gradcheck.h,
// reference_params): parameters widened exactly, and model.ln_eps as configured, not the float32
// the float32 kernels add (1e-5, not 9.99999975e-06: PyTorch float64 with eps = 1e-5 agrees with
// the reference to ~1e-15 only with the configured value; the float32's differs by ~1e-10).
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "src/analysis/gradcheck.h"
#include "wte/config.h"
#include "wte/model.h"

using namespace wte;

TEST(ReferenceParams, LnEpsIsTheConfiguredDecimal) {
  EXPECT_EQ(configured_ln_eps(1e-5f), 1e-5);
  EXPECT_EQ(configured_ln_eps(1e-6f), 1e-6);
  EXPECT_EQ(configured_ln_eps(3e-5f), 3e-5);
  EXPECT_EQ(configured_ln_eps(0.1f), 0.1);
  EXPECT_EQ(configured_ln_eps(1.5e-12f), 1.5e-12);
  // A value whose shortest decimal is long still reads back as the same float32.
  const float odd = 9.99999975e-06f;
  EXPECT_EQ(static_cast<float>(configured_ln_eps(odd)), odd);
}

TEST(ReferenceParams, CarryTheConfiguredLnEpsAndTheExactWeights) {
  for (const char* eps : {"1e-5", "1e-6", "0.1"}) {
    const Config cfg = parse_config(std::string("[model]\nvocab_size = 256\nd_model = 8\n"
                                                "n_ctx = 4\nn_layer = 1\nn_head = 2\nln_eps = ") +
                                        eps + "\n[data]\nseq_len = 4\n",
                                    "test");
    Model model(cfg.model);
    model.init_weights(3);
    const ref::ModelParams<double> p = reference_params(model);
    EXPECT_EQ(p.ln_eps, std::stod(eps)) << eps;
    EXPECT_EQ(p.wte[5], static_cast<double>(model.param_data()[5]));
  }
}
