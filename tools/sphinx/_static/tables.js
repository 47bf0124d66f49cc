// Tables fit the text column. showdoc.css wraps their cells between words; this adds break opportunities inside the
// long names that tables quote (`AdditiveTreePE(depth_init="sinusoidal")`, 10a_for2lam_experiment): a <wbr> after
// each `_ . , ( = /` of a cell's text. A table whose words are still wider than the column (a dozen columns of
// measurements) gets the class `tight` (showdoc.css): columns of equal width, smaller type, and cells that may
// break inside words. tests/test_docs.py checks that
// no table of the home page, "Your own transformer" and "Which encoding when" is wider than its box.
(function () {
  const BREAK_AFTER = /([_.,(=\/])(?=\S)/g;

  function addBreaks(table) {
    const walker = document.createTreeWalker(table, NodeFilter.SHOW_TEXT);
    const nodes = [];
    while (walker.nextNode()) {
      const node = walker.currentNode;
      if (!node.parentElement.closest('mjx-container, .math') && BREAK_AFTER.test(node.nodeValue)) nodes.push(node);
      BREAK_AFTER.lastIndex = 0;
    }
    for (const node of nodes) {
      const parts = node.nodeValue.split(BREAK_AFTER), frag = document.createDocumentFragment();
      // split() with a capturing group gives text, separator, text, ...: a <wbr> after each separator
      parts.forEach((part, i) => {
        frag.appendChild(document.createTextNode(part));
        if (i % 2 === 1) frag.appendChild(document.createElement('wbr'));
      });
      node.parentNode.replaceChild(frag, node);
    }
  }

  function fit() {
    for (const table of document.querySelectorAll('.bd-article table')) {
      table.classList.remove('tight');
      const box = table.parentElement;
      if (table.scrollWidth > box.clientWidth + 1) table.classList.add('tight');
    }
  }

  document.addEventListener('DOMContentLoaded', () => {
    document.querySelectorAll('.bd-article table').forEach(addBreaks);
    fit();
  });
  window.addEventListener('load', () => {
    fit();
    if (window.MathJax && MathJax.startup && MathJax.startup.promise) MathJax.startup.promise.then(fit);
  });
  window.addEventListener('resize', fit);
  document.addEventListener('toggle', fit, true);   // a table in a <details> that opens (13's rows per family)
})();
