#pragma once
// Central finite differences in float64, shared by the reference tests.

#include <cstddef>
#include <vector>

namespace hawk_test {

//! d loss(problem) / d v[j] for every element of the vector `select(problem)` picks, by central differences
//! with step `step`. `problem` is taken by value: the caller's copy is never perturbed.
template <class Problem, class Loss, class Select>
std::vector<double> central_difference_gradient(Problem problem, Loss loss, Select select, double step) {
  std::vector<double>& v = select(problem);
  std::vector<double> grad(v.size());
  for (std::size_t j = 0; j < v.size(); ++j) {
    const double original = v[j];
    v[j] = original + step;
    const double plus = loss(problem);
    v[j] = original - step;
    const double minus = loss(problem);
    v[j] = original;
    grad[j] = (plus - minus) / (2.0 * step);
  }
  return grad;
}

}  // namespace hawk_test
