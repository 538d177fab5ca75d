/**
 * The fixed texts of bench:voices. The English paragraphs (~60 words each) are what every English
 * voice speaks and the recogniser transcribes: everyday words that are in the recogniser's
 * dictionary, a few small numbers in digits (the engines read them, the word error rate normalises
 * them), no names or years it could only guess. The other languages' texts measure CPU, first
 * audio and memory only: the recogniser knows English alone.
 */

/** The sentence of bench:first-byte's one-shots: its first audio is what a one-shot waits for. */
export const SHORT_SENTENCE = 'This is one shot number 5, spoken at once.';

export const ENGLISH_PARAGRAPHS: readonly string[] = [
  'On Monday morning the bus to the station was late again, so my sister decided to walk. The ' +
    'streets were still wet after the rain, and the air smelled of fresh bread from the bakery on ' +
    'the corner. She counted 12 red umbrellas before she reached the bridge, where an old man was ' +
    'feeding the ducks and humming a song she almost remembered.',
  'To make a good cup of tea, first fill the kettle with fresh cold water and bring it to the ' +
    'boil. Warm the pot, then add one spoon of leaves for each person and one more for the pot. ' +
    'Pour the water over the leaves, wait for 3 or 4 minutes, and serve it with milk or lemon, ' +
    'whichever you prefer.',
  'Scientists who study the ocean have found that some small fish can hear sounds from many ' +
    'miles away. They use this sense to find their way back to the reef where they were born. ' +
    'When boats and ships become too loud, the young fish get lost more often, which is why ' +
    'several countries now ask captains to slow down near the coast.',
];

/** A short sentence and a paragraph in another language, for that language's default voice. */
export interface LanguageText {
  /** The language tag a new voice of it would be created with. */
  language: string;
  short: string;
  paragraph: string;
}

export const OTHER_LANGUAGES: readonly LanguageText[] = [
  {
    language: 'de',
    short: 'Das ist ein kurzer Satz, sofort gesprochen.',
    paragraph:
      'Am Sonntag gingen wir mit den Kindern in den Wald. Die Sonne schien durch die Bäume, und ' +
      'überall sangen die Vögel. Nach einer Stunde machten wir eine Pause an einem kleinen See, ' +
      'aßen Brot mit Käse und tranken kalten Tee. Am Abend waren alle müde, aber sehr glücklich.',
  },
  {
    language: 'fr',
    short: 'Voici une phrase courte, dite tout de suite.',
    paragraph:
      'Le dimanche matin, nous sommes allés au marché avec nos voisins. Il faisait beau, et les ' +
      'étals débordaient de fruits, de légumes et de fromages. Après une heure, nous avons pris un ' +
      'café sur la place, en regardant les enfants jouer près de la fontaine. Le soir, tout le ' +
      'monde était fatigué mais content.',
  },
  {
    language: 'es',
    short: 'Esta es una frase corta, dicha enseguida.',
    paragraph:
      'El domingo por la mañana fuimos al mercado con nuestros vecinos. Hacía buen tiempo, y los ' +
      'puestos estaban llenos de frutas, verduras y quesos. Después de una hora, tomamos un café ' +
      'en la plaza mientras los niños jugaban cerca de la fuente. Por la noche, todos estábamos ' +
      'cansados pero contentos.',
  },
  {
    language: 'ru',
    short: 'Это короткая фраза, сказанная сразу.',
    paragraph:
      'В воскресенье утром мы пошли на рынок с соседями. Была хорошая погода, и прилавки были ' +
      'полны фруктов, овощей и сыров. Через час мы выпили кофе на площади, пока дети играли у ' +
      'фонтана. Вечером все устали, но были довольны.',
  },
  {
    language: 'zh',
    short: '这是一个短句，马上说出来。',
    paragraph:
      '星期天早上，我们和邻居一起去了市场。天气很好，摊位上摆满了水果、蔬菜和奶酪。' +
      '一个小时以后，我们在广场上喝了咖啡，孩子们在喷泉旁边玩。晚上大家都很累，但是很开心。',
  },
];
