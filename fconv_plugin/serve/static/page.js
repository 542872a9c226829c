// The page of fconv-serve: translate a sentence, draw each decoder layer's attention (§3.3).
"use strict";

function heatMap(weights, source, target, title) {
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
      body: JSON.stringify({text: text, attention: true}),
    });
    const answer = await response.json();
    if (!response.ok) { error.textContent = answer.error; return; }
    const best = answer.translations[0];
    document.getElementById("translation").textContent = best.text;
    document.getElementById("meta").textContent = `score ${best.score.toFixed(3)} (log2, as fairseq-interactive prints it)`;
    const layers = document.getElementById("layers");
    layers.replaceChildren(...best.attention.layers.map((weights, l) =>
      heatMap(weights, best.attention.source, best.attention.target, `decoder layer ${l + 1}`)));
  } catch (e) {
    error.textContent = `The server did not answer: ${e}`;
  } finally {
    document.getElementById("go").disabled = false;
  }
}

document.getElementById("go").addEventListener("click", translate);
document.getElementById("source").addEventListener("keydown", e => {
  if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); translate(); }
});
fetch("/models").then(r => r.json()).then(m => {
  const d = m.models.find(x => x.name === m.default);
  document.getElementById("model").textContent =
    `${d.name}: ${d.arch}, ${d.source_dictionary} → ${d.target_dictionary} symbols${d.int8 ? ", int8" : ""}`;
});
