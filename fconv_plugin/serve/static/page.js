// The page of fconv-serve: translate a text (a sentence or paragraphs), draw each decoder
// layer's attention (§3.3) for its first sentence.
"use strict";

const MAX_TOKENS_DRAWN = 60;  // a heat map shows at most this many source and target tokens

function heatMap(weights, source, target, title) {
  if (source.length > MAX_TOKENS_DRAWN || target.length > MAX_TOKENS_DRAWN) {
    title += ` (the first ${Math.min(target.length, MAX_TOKENS_DRAWN)} × ${Math.min(source.length, MAX_TOKENS_DRAWN)} tokens)`;
    source = source.slice(0, MAX_TOKENS_DRAWN);
    target = target.slice(0, MAX_TOKENS_DRAWN);
    weights = weights.slice(0, MAX_TOKENS_DRAWN).map(row => row.slice(0, MAX_TOKENS_DRAWN));
  }
  const cell = 16, left = 8 + 7 * Math.max(...target.map(t => t.length)), top = 8 + 7 * Math.max(...source.map(s => s.length));
  const canvas = document.createElement("canvas");
  canvas.width = left + cell * source.length + 4;
  canvas.height = top + cell * target.length + 4;
  canvas.className = "attention";
  const g = canvas.getContext("2d");
  g.font = "11px sans-serif";
  g.fillStyle = "#222";
  source.forEach((word, j) => {
    g.save(); g.translate(left + cell * j + cell / 2 + 4, top - 4); g.rotate(-Math.PI / 2);
    g.fillText(word, 0, 0); g.restore();
  });
  target.forEach((word, i) => { g.textAlign = "right"; g.fillText(word, left - 4, top + cell * i + cell / 2 + 4); });
  weights.forEach((row, i) => row.forEach((w, j) => {
    const shade = Math.round(255 * (1 - w));  // darker = more attention, as fconv-attention draws it
    g.fillStyle = `rgb(${shade},${shade},${shade})`;
    g.fillRect(left + cell * j, top + cell * i, cell - 1, cell - 1);
  }));
  const figure = document.createElement("figure");
  const caption = document.createElement("figcaption");
  caption.textContent = title;
  figure.append(canvas, caption);
  return figure;
}

async function translate() {
  const text = document.getElementById("source").value.trim();
  const error = document.getElementById("error");
  error.textContent = "";
  if (!text) { error.textContent = "Type a sentence first."; return; }
  document.getElementById("go").disabled = true;
  try {
    const response = await fetch("/translate", {
      method: "POST", headers: {"Content-Type": "application/json"},
      // a document: paragraphs and lines kept, each line split into sentences by the server
      body: JSON.stringify({text: text, attention: true, document: true, model: document.getElementById("models").value}),
    });
    const answer = await response.json();
    if (!response.ok) { error.textContent = answer.error; return; }
    const result = answer.translations[0];
    const sentences = result.sentences || [result];
    document.getElementById("translation").textContent = result.text;
    document.getElementById("meta").textContent = sentences.length > 1
      ? `${sentences.length} sentences; the attention below is the first one's`
      : `score ${sentences[0].score.toFixed(3)} (log2, as fairseq-interactive prints it)`;
    const first = sentences[0];
    const of = sentences.length > 1 ? `, sentence 1 of ${sentences.length}` : "";
    const maps = first.attention ? first.attention.layers.map((weights, l) =>  // none: passed through, not decoded
      heatMap(weights, first.attention.source, first.attention.target, `decoder layer ${l + 1}${of}`)) : [];
    document.getElementById("layers").replaceChildren(...maps);
  } catch (e) {
    error.textContent = `The server did not answer: ${e}`;
  } finally {
    document.getElementById("go").disabled = false;
  }
}

function describe(model) {
  const languages = model.source_lang ? `${model.source_lang} → ${model.target_lang}, ` : "";
  return `${model.arch}, ${languages}${model.source_dictionary} → ${model.target_dictionary} symbols` +
    `${model.int8 ? ", int8" : ""}${model.copying ? ", copying" : ""}`;
}

document.getElementById("go").addEventListener("click", translate);
document.getElementById("source").addEventListener("keydown", e => {
  if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); translate(); }
});
fetch("/models").then(r => r.json()).then(m => {
  const select = document.getElementById("models");
  const byName = Object.fromEntries(m.models.map(model => [model.name, model]));
  select.replaceChildren(...m.models.map(model => new Option(model.name, model.name, false, model.name === m.default)));
  const show = () => { document.getElementById("model").textContent = describe(byName[select.value]); };
  select.addEventListener("change", show);
  show();
});
