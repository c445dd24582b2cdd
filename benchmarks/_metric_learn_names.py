"""metric-learn's estimator names and cvxmetric's stand-ins, shared by the suite's plugin and its example runner.

A module without imports: :mod:`benchmarks.metric_learn_suite` copies it next to the plugin into
metric-learn's test folder, and the example runner imports it from its own folder.
"""

#: metric-learn's estimator name -> the cvxmetric estimator that stands in for it.
SUBSTITUTES = {"LMNN": "LMNN", "ITML": "ITML", "ITML_Supervised": "ITML_Supervised", "MMC": "MMC",
               "MMC_Supervised": "MMC_Supervised", "LSML": "Qwise", "LSML_Supervised": "Qwise_Supervised"}

#: metric-learn's estimators that cvxmetric does not provide.
OTHERS = ("Covariance", "LFDA", "MLKR", "NCA", "RCA", "RCA_Supervised", "SDML", "SDML_Supervised", "SCML",
          "SCML_Supervised")
