"""The stop words: one Chinese and one English list for every analyser side.

Merged (2026-12) from the retrieval analyser's lists (ZH 109, EN 80) and the offline
baselines' (ZH 84, EN 91) as their union, minus two dead entries (``吗？``/``呢？``: the
analyser never sees punctuation inside a word). What is on them:

* function words, pronouns and question words (的 了 吗 什么 多少 如何 / a the what how);
* quantity question phrases jieba keeps whole (几天 多少钱 多长时间 / many much);
* the domain-generic 公司 / 我司 / 贵司: every KB text is about the company, so the word says
  nothing about which chunk or sentence answers;
* the light verb *get* (get / gets / got / getting, 2026-12), like *do* and *have*: "Which
  laptop do engineers get?" matched an English product page by "incidents get a first
  response" and pushed the Chinese laptop page out of the top 5.

A change here changes retrieval scores and the offline baselines' numbers: bump
:data:`app.text.analyser.ANALYSER_VERSION` and record the before/after tables.
"""

from __future__ import annotations

_ZH = """
的 了 吗 呢 吧 啊 呀 哦 嘛 么 是 在 和 与 及 或 也 都 就 还 又 而 并 被 把 对 从 向 给 让 到 为
为了 之 其 此 该 等 个 些 中 上 下 我 你 他 她 它 我们 你们 他们 她们 它们 咱们 自己 这 那 这个 那个
这些 那些 哪 哪个 哪些 哪里 哪儿 谁 啥 什么 什么时候 时候 怎么 怎样 怎么样 怎么办 如何 为什么 为何
多少 几 几个 几天 几年 几次 多少钱 多少天 多久 多长 多长时间 是否 是不是 能否 能不能 可不可以 可以
能 会 要 需要 应该 请 请问 一下 一个 一些 有 有没有 没有 以及 关于 分别 的话 所以 因为 如果 但是
然后 公司 我司 贵司
"""
_EN = """
a an the and or but if of to in on at for from by with without about as into is are was
were be been being do does did doing done have has had having i me my we our us you your
he she it its they them their this that these those there here what which who whom whose
when where why how can could should would will shall may might must not no yes so than then
too very just also any all some each per please tell much many get gets got getting
"""

STOPWORDS_ZH = frozenset(_ZH.split())
STOPWORDS_EN = frozenset(_EN.split())
